//! Argument parsers shared by the subcommands. Each returns a message that
//! says what was expected, so clap prints a clear error.

use thinstream_base::Duration;

/// `250ms`, `1.5s`, `20us`; a bare number is milliseconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    Duration::parse(s).map_err(|e| e.to_string())
}

/// `HOST:PORT`: an IP address and port (`127.0.0.1:9899`, `[::1]:9899`), or
/// a name the system resolver knows and a port (`localhost:9899`). A name
/// with both kinds of address gives its first IPv4 one (the listener's
/// default, 127.0.0.1, is IPv4), else its first address.
pub(crate) fn parse_socket_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    let expected = "expected HOST:PORT, e.g. 127.0.0.1:9899, [::1]:9899 or localhost:9899";
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("{s:?} has no port ({expected})"));
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(format!("{s:?}: {expected}"));
    }
    let all: Vec<std::net::SocketAddr> = s
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host:?}: {e}"))?
        .collect();
    all.iter()
        .find(|a| a.is_ipv4())
        .or_else(|| all.first())
        .copied()
        .ok_or_else(|| format!("{host:?} resolves to no address"))
}

/// A message size: `N` bytes, or `MIN..MAX` (inclusive) for sizes drawn
/// uniformly per message from the run's seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SizeSpec {
    pub(crate) min: usize,
    pub(crate) max: usize,
}

pub(crate) fn parse_size(s: &str) -> Result<SizeSpec, String> {
    let num = |t: &str| -> Result<usize, String> {
        t.trim()
            .parse::<usize>()
            .map_err(|_| format!("{t:?} is not a byte count (expected e.g. 100 or 1..4000)"))
    };
    let spec = match s.split_once("..") {
        Some((a, b)) => SizeSpec {
            min: num(a)?,
            max: num(b.trim_start_matches('='))?,
        },
        None => {
            let n = num(s)?;
            SizeSpec { min: n, max: n }
        }
    };
    if spec.min == 0 {
        return Err("messages must be at least 1 byte (SCTP has no empty user messages)".into());
    }
    if spec.min > spec.max {
        return Err(format!("empty size range {}..{}", spec.min, spec.max));
    }
    Ok(spec)
}

/// A transport configuration from a preset string such as `rfc`,
/// `linux+lt` or `thin+rdb` (grammar: `thinstream mechanisms`).
pub(crate) fn parse_preset(s: &str) -> Result<thinstream_proto::Config, String> {
    thinstream_proto::Config::from_preset(s).map_err(|e| e.to_string())
}

static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Writes `text` to standard output. Once the reader has gone away
/// (`thinstream run … | head`), further output is dropped quietly instead
/// of panicking the way `print!` does, and the command still finishes its
/// work (results.json, the report) and exits normally; other write errors
/// are reported once on stderr.
pub(crate) fn out(text: &str) {
    use std::io::Write as _;
    use std::sync::atomic::Ordering;
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("thinstream: cannot write to stdout: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_and_names() {
        // Addresses parse as they are; no resolver is asked.
        assert_eq!(
            parse_socket_addr("127.0.0.1:9899").unwrap(),
            "127.0.0.1:9899".parse().unwrap()
        );
        assert_eq!(
            parse_socket_addr("[::1]:7").unwrap(),
            "[::1]:7".parse().unwrap()
        );
        // `localhost` comes from the hosts file (no query leaves the
        // machine); its IPv4 address is preferred.
        let a = parse_socket_addr("localhost:9899").unwrap();
        assert!(a.ip().is_loopback(), "{a}");
        assert_eq!(a.port(), 9899);
        if a.is_ipv6() {
            // Only where the hosts file has no IPv4 entry for it.
            assert_eq!(a.ip(), std::net::Ipv6Addr::LOCALHOST);
        }
        // Malformed: said without resolving anything.
        for bad in [
            "localhost",
            "localhost:",
            ":9899",
            "localhost:70000",
            "127.0.0.1",
        ] {
            let e = parse_socket_addr(bad).unwrap_err();
            assert!(e.contains("HOST:PORT"), "{bad}: {e}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("100").unwrap(), SizeSpec { min: 100, max: 100 });
        assert_eq!(
            parse_size("1..4000").unwrap(),
            SizeSpec { min: 1, max: 4000 }
        );
        assert!(parse_size("0").is_err());
        assert!(parse_size("10..5").is_err());
        assert!(parse_size("big").is_err());
    }
}

/// `--pmtu`: `auto` or a packet size in bytes (128..=65507).
pub(crate) fn parse_pmtu(s: &str) -> Result<thinstream::PathMtu, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(thinstream::PathMtu::Auto);
    }
    match s.parse::<usize>() {
        Ok(n) if (128..=65_507).contains(&n) => Ok(thinstream::PathMtu::Fixed(n)),
        Ok(n) => Err(format!(
            "{n} bytes is outside 128..=65507 (an SCTP packet must hold a chunk and fit one UDP datagram)"
        )),
        Err(_) => Err(format!("{s:?} is neither `auto` nor a size in bytes")),
    }
}

/// Endpoint options `send` and `listen` share.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct EndpointArgs {
    /// TESTING ONLY: derive verification tags, initial TSNs and the cookie
    /// secret from this seed instead of the OS random source (predictable
    /// tags let an off-path attacker inject packets).
    #[arg(long, hide_short_help = true)]
    testing_fixed_seed: Option<u64>,
    /// Send every datagram with its own system call (no UDP segmentation
    /// offload): captures on loopback then show one SCTP packet per
    /// datagram.
    #[arg(long)]
    no_gso: bool,
    /// Busy polling: after sending, read the socket without sleeping for
    /// up to this long (e.g. `100us`), so a quick reply is handled without
    /// a thread wake-up. Trims round-trip tails on loopback and LANs at the
    /// cost of CPU; off by default.
    #[arg(long, value_parser = crate::util::parse_duration)]
    busy_poll: Option<thinstream_base::Duration>,
}

impl EndpointArgs {
    /// Sets these options on an endpoint configuration.
    pub(crate) fn apply(&self, config: &mut thinstream::EndpointConfig) {
        if let Some(seed) = self.testing_fixed_seed {
            config.testing_fixed_seed(seed);
        }
        config.segmentation_offload(!self.no_gso);
        config.busy_poll(self.busy_poll.map(|d| d.to_std()));
    }
}
