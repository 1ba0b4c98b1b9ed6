//! Association setup and teardown over the virtual link.

use thinstream_base::Duration;
use thinstream_proto::testkit::{Pair, Side};
use thinstream_proto::State;

// The four-way handshake completes in two round trips.
#[test]
fn handshake_completes() {
    let mut p = Pair::default_traced(1);
    p.connect();
    assert_eq!(p.client.state(), State::Established);
    assert_eq!(p.server.state(), State::Established);
    // INIT at 0, INIT ACK at 50 ms, COOKIE ECHO at 100, COOKIE ACK at 150,
    // which reaches the client at 200 ms.
    assert_eq!(p.now, thinstream_base::Instant::from_millis(200));
    assert_eq!(p.client.outbound_streams(), 10);
    assert_eq!(p.server.inbound_streams(), 10);
    assert_eq!(p.client.peer_tag(), p.server.local_tag());
    assert_eq!(p.server.peer_tag(), p.client.local_tag());
}

// A message goes through and is delivered once.
#[test]
fn one_message() {
    let mut p = Pair::default_traced(2);
    p.connect();
    p.send(Side::Client, 0, false, b"hello").unwrap();
    p.drive_for(Duration::from_secs(1));
    assert_eq!(
        p.take_received(Side::Server),
        vec![(0, false, b"hello".to_vec())]
    );
}
