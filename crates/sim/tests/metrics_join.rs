//! A run result carries what the metrics crate needs: sender and receiver
//! trace records per endpoint and the application send times. The metric's
//! view (joined on units) must agree with the apps' view (joined on payload
//! ids).

mod common;

use common::*;
use std::collections::BTreeMap;
use thinstream_base::trace::Record;
use thinstream_base::{Duration, Instant};
use thinstream_link::LinkConfig;
use thinstream_metrics::{AnalysisOptions, AppSend, FlowAnalysis, FlowInput};
use thinstream_sim::app::PayloadCheck;
use thinstream_sim::{FlowId, FlowSpec, MessageSource, Side, Simulation, Sink, Topology};

// Delivery times and retransmission counts from the metrics crate match the sink and the raw records.
#[test]
fn metrics_agree_with_the_apps() {
    let seed = test_seed(21);
    let _r = Reproduce(seed);
    let lossy = LinkConfig::parse_netem("delay 30ms loss 15%").unwrap();
    let topology = Topology::TwoHost {
        forward: lossy.clone(),
        reverse: lossy,
    };
    let flow = FlowSpec::new(
        stop_and_wait_endpoint(
            Duration::from_millis(150),
            MessageSource::new(periodic(
                Instant::from_millis(1),
                Duration::from_millis(250),
                120,
                100,
            )),
        ),
        stop_and_wait_endpoint(Duration::from_millis(150), Sink::messages()),
    );
    let result = Simulation::new(seed, &topology, vec![flow])
        .unwrap()
        .run(Instant::from_secs(100));
    let a = result.endpoint(FlowId(0), Side::A);
    let b = result.endpoint(FlowId(0), Side::B);
    let source = a.app.source().unwrap();
    let sink = b.app.received().unwrap();
    let sends: Vec<AppSend> = source
        .app_send_times()
        .map(|(message, time)| AppSend { message, time })
        .collect();
    let analysis = FlowAnalysis::build(
        FlowInput {
            sender: &a.records,
            receiver: Some(&b.records),
            app_sends: Some(&sends),
            duplicate_reports: None,
        },
        AnalysisOptions::default(),
    )
    .unwrap();
    assert_eq!(analysis.messages().len(), 120);
    // Payload id -> transport message id, from the source's log.
    let transport_id: BTreeMap<u32, u64> =
        source.sent.iter().map(|m| (m.id, m.transport_id)).collect();
    for d in &sink.deliveries {
        let PayloadCheck::Intact { id } = d.check else {
            panic!("damaged delivery {d:?}")
        };
        let m = analysis.message(transport_id[&id]).unwrap();
        assert_eq!(m.delivered, Some(d.time), "message {id}");
    }
    let rtx_pieces = a
        .records
        .iter()
        .filter_map(|r| match r {
            Record::PacketSent { data, .. } => {
                Some(data.iter().filter(|p| p.reason.is_retransmission()).count())
            }
            _ => None,
        })
        .sum::<usize>();
    let rtx_metric: u32 = analysis.messages().iter().map(|m| m.retransmissions).sum();
    assert!(rtx_pieces > 0);
    assert_eq!(rtx_metric as usize, rtx_pieces);
}
