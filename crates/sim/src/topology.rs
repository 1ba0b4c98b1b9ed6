//! Topologies as data, and the network they build: hosts, routers and the
//! links between them, with static routing by destination address.
//!
//! Addressing (ranges that are never routed; the simulator never touches a
//! real network): flow `i` < 254 has endpoint A at `192.0.2.(i+1)` and
//! endpoint B at `198.51.100.(i+1)` (documentation ranges, RFC 5737); flows
//! from 254 on use the benchmarking range of RFC 2544, 198.18.0.0/15: A in
//! `198.18.x.y`, B in `198.19.x.y` (y in 1..=254), up to [`MAX_FLOWS`]. All
//! on the flow's UDP port (9899, the SCTP-over-UDP port of RFC 6951, unless
//! the flow says otherwise). The first 254 flows keep their addresses, so
//! results of smaller topologies do not change.

use crate::{EndpointId, FlowId, LinkId, Side};
use smallvec::SmallVec;
use std::fmt;
use std::marker::PhantomData;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use thinstream_base::Seed;
use thinstream_link::LinkConfig;

/// Most flows a topology can address: 254 in the documentation ranges plus
/// 256 × 254 in the benchmarking range.
pub const MAX_FLOWS: usize = 254 + 256 * 254;

/// How the endpoints are connected.
#[derive(Clone, Debug, PartialEq)]
pub enum Topology {
    /// Two hosts joined by one link per direction; every A endpoint sits on
    /// the left host, every B endpoint on the right host, so all flows share
    /// both links.
    TwoHost {
        forward: LinkConfig,
        reverse: LinkConfig,
    },
    /// N sender/receiver pairs behind two routers joined by a shared
    /// bottleneck link per direction (the rate-limited drop-tail queue lives
    /// in the bottleneck link's config).
    Dumbbell(Dumbbell),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Dumbbell {
    /// Left router to right router (A side to B side).
    pub bottleneck_forward: LinkConfig,
    /// Right router to left router.
    pub bottleneck_reverse: LinkConfig,
    /// One entry per flow, in flow order.
    pub access: Vec<Access>,
}

/// The access links of one dumbbell flow. Each config is instantiated once
/// per direction (host to router and router to host), each with its own seed.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Access {
    /// Between endpoint A and the left router.
    pub a: LinkConfig,
    /// Between endpoint B and the right router.
    pub b: LinkConfig,
}

impl Topology {
    /// Whether any link may change a byte of a packet in flight (a
    /// `corrupt` probability above zero). When none can, a checksum never
    /// rejects a packet, and a run may leave checksums to the path (see
    /// `thinstream_tcp::TcpConfig::checksum_offload`).
    pub fn may_corrupt(&self) -> bool {
        let corrupts = |c: &LinkConfig| c.corrupt.is_some_and(|p| p.get() > 0.0);
        match self {
            Topology::TwoHost { forward, reverse } => corrupts(forward) || corrupts(reverse),
            Topology::Dumbbell(d) => {
                corrupts(&d.bottleneck_forward)
                    || corrupts(&d.bottleneck_reverse)
                    || d.access.iter().any(|a| corrupts(&a.a) || corrupts(&a.b))
            }
        }
    }
}

/// A topology that cannot be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyError {
    NoFlows,
    TooManyFlows {
        flows: usize,
        max: usize,
    },
    /// The dumbbell lists a different number of access pairs than there are flows.
    AccessCount {
        flows: usize,
        access: usize,
    },
    /// A link config failed validation (`label` names the link).
    BadLink {
        label: String,
        error: String,
    },
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::NoFlows => write!(f, "a simulation needs at least one flow"),
            TopologyError::TooManyFlows { flows, max } => {
                write!(f, "{flows} flows requested, at most {max} can be addressed")
            }
            TopologyError::AccessCount { flows, access } => write!(
                f,
                "the dumbbell has {access} access link pairs for {flows} flows; give one per flow"
            ),
            TopologyError::BadLink { label, error } => write!(f, "link {label}: {error}"),
        }
    }
}

impl std::error::Error for TopologyError {}

/// The address of endpoint `side` of flow `flow` on UDP port `port`.
pub fn endpoint_addr(flow: usize, side: Side, port: u16) -> SocketAddr {
    // `flow < MAX_FLOWS` is checked by the builder, so the parts fit.
    let ip = if flow < 254 {
        let host = (flow + 1) as u8;
        match side {
            Side::A => Ipv4Addr::new(192, 0, 2, host),
            Side::B => Ipv4Addr::new(198, 51, 100, host),
        }
    } else {
        let k = (flow - 254).min(256 * 254 - 1);
        let (x, y) = ((k / 254) as u8, (k % 254 + 1) as u8);
        match side {
            Side::A => Ipv4Addr::new(198, 18, x, y),
            Side::B => Ipv4Addr::new(198, 19, x, y),
        }
    };
    SocketAddr::new(IpAddr::V4(ip), port)
}

#[cfg(test)]
mod addressing {
    use super::*;

    #[test]
    fn every_flow_has_its_own_addresses() {
        let mut seen = std::collections::BTreeSet::new();
        for flow in 0..MAX_FLOWS {
            for side in [Side::A, Side::B] {
                assert!(seen.insert(endpoint_addr(flow, side, 9899)), "flow {flow}");
            }
        }
        // The first 254 keep the documentation-range addresses.
        assert_eq!(endpoint_addr(0, Side::A, 1).ip().to_string(), "192.0.2.1");
        assert_eq!(
            endpoint_addr(253, Side::B, 1).ip().to_string(),
            "198.51.100.254"
        );
        assert_eq!(
            endpoint_addr(254, Side::A, 1).ip().to_string(),
            "198.18.0.1"
        );
        assert_eq!(
            endpoint_addr(999, Side::B, 1).ip().to_string(),
            "198.19.2.238"
        );
    }

    // Decoding an address gives back the endpoint it was made for; other
    // addresses decode to nothing.
    #[test]
    fn addresses_decode_to_their_endpoint() {
        for flow in (0..MAX_FLOWS)
            .step_by(7)
            .chain([253, 254, 255, MAX_FLOWS - 1])
        {
            for side in [Side::A, Side::B] {
                let addr = endpoint_addr(flow, side, 5000);
                assert_eq!(
                    endpoint_of_ip(addr),
                    Some(endpoint_id(FlowId(flow), side)),
                    "{addr}"
                );
            }
        }
        for other in [
            "192.0.2.0:1",
            "192.0.2.255:1",
            "198.18.3.0:1",
            "198.19.0.255:1",
            "10.0.0.1:1",
            "[::1]:1",
        ] {
            assert_eq!(endpoint_of_ip(other.parse().unwrap()), None, "{other}");
        }
    }

    // The table answers what an exact map of socket addresses answers,
    // including for a right address on the wrong port and for ids outside
    // the range it covers.
    #[test]
    fn table_answers_as_an_exact_map() {
        let keys: Vec<(SocketAddr, LinkId)> = (300..340)
            .map(|f| (endpoint_addr(f, Side::B, 9000 + f as u16), LinkId(f * 3)))
            .chain([(endpoint_addr(5, Side::A, 1), LinkId(7))])
            .collect();
        let map: std::collections::BTreeMap<SocketAddr, LinkId> = keys.iter().copied().collect();
        let table = AddrTable::new(keys.iter().copied());
        for flow in 0..400 {
            for side in [Side::A, Side::B] {
                for port in [1, 9000 + flow as u16, 9001 + flow as u16] {
                    let addr = endpoint_addr(flow, side, port);
                    assert_eq!(table.get(addr), map.get(&addr).copied(), "{addr}");
                }
            }
        }
        assert_eq!(table.get("10.1.2.3:1".parse().unwrap()), None);
    }
}

/// The endpoint that [`endpoint_addr`] gives the IP address of `addr`
/// (whatever its port), or `None` for an address outside the scheme.
pub(crate) fn endpoint_of_ip(addr: SocketAddr) -> Option<EndpointId> {
    let IpAddr::V4(ip) = addr.ip() else {
        return None;
    };
    let (flow, side) = match ip.octets() {
        [192, 0, 2, h @ 1..=254] => (usize::from(h) - 1, Side::A),
        [198, 51, 100, h @ 1..=254] => (usize::from(h) - 1, Side::B),
        [198, s @ (18 | 19), x, y @ 1..=254] => (
            254 + usize::from(x) * 254 + usize::from(y) - 1,
            if s == 18 { Side::A } else { Side::B },
        ),
        _ => return None,
    };
    Some(endpoint_id(FlowId(flow), side))
}

/// A value that fits a table slot (ids below 2^32 - 1).
pub(crate) trait Slot: Copy {
    fn to_slot(self) -> u32;
    fn from_slot(slot: u32) -> Self;
}

impl Slot for LinkId {
    fn to_slot(self) -> u32 {
        u32::try_from(self.0).expect("link id fits 32 bits")
    }
    fn from_slot(slot: u32) -> Self {
        LinkId(slot as usize)
    }
}

impl Slot for EndpointId {
    fn to_slot(self) -> u32 {
        u32::try_from(self.0).expect("endpoint id fits 32 bits")
    }
    fn from_slot(slot: u32) -> Self {
        EndpointId(slot as usize)
    }
}

/// A map from endpoint addresses to `V`, stored as an array indexed by the
/// endpoint id that the address decodes to ([`endpoint_of_ip`]), covering
/// only the ids between the least and the greatest key. A lookup is an
/// address decode and one 8-byte read, whatever the number of flows, where
/// a search tree over thousands of addresses touches several nodes; the
/// answers are those of an exact map of socket addresses (the port is
/// compared too).
#[derive(Debug, Clone)]
pub(crate) struct AddrTable<V> {
    first: usize,
    /// (port, value slot); `EMPTY` marks an id without an entry. A host of
    /// one endpoint (every host of a dumbbell) keeps its entry inline, in
    /// the node itself, rather than in a heap block of its own: a delivery
    /// then reads no line beyond the node.
    entries: SmallVec<[(u16, u32); 1]>,
    _value: PhantomData<V>,
}

impl<V: Slot> AddrTable<V> {
    const EMPTY: u32 = u32::MAX;

    /// Builds the table. Every key must be an address of [`endpoint_addr`]
    /// (the builder only makes those).
    pub(crate) fn new(pairs: impl IntoIterator<Item = (SocketAddr, V)>) -> Self {
        let pairs: Vec<(usize, u16, u32)> = pairs
            .into_iter()
            .map(|(addr, v)| {
                let id = endpoint_of_ip(addr).expect("routing key is an endpoint address");
                let slot = v.to_slot();
                assert_ne!(slot, Self::EMPTY, "id too large for a routing table");
                (id.0, addr.port(), slot)
            })
            .collect();
        let first = pairs.iter().map(|p| p.0).min().unwrap_or(0);
        let last = pairs.iter().map(|p| p.0 + 1).max().unwrap_or(0);
        let mut entries = SmallVec::from_elem((0, Self::EMPTY), last.saturating_sub(first));
        for (id, port, slot) in pairs {
            // A later pair for the same address replaces the earlier one,
            // as a map insert would.
            entries[id - first] = (port, slot);
        }
        AddrTable {
            first,
            entries,
            _value: PhantomData,
        }
    }

    /// Where `addr`'s entry is (for a prefetch; not read here).
    pub(crate) fn entry_address(&self, addr: SocketAddr) -> Option<*const u8> {
        let i = endpoint_of_ip(addr)?.0.checked_sub(self.first)?;
        (i < self.entries.len()).then(|| self.entries.as_ptr().wrapping_add(i).cast::<u8>())
    }

    /// The value of `addr`, if it has one.
    pub(crate) fn get(&self, addr: SocketAddr) -> Option<V> {
        let id = endpoint_of_ip(addr)?;
        let &(port, slot) = self.entries.get(id.0.checked_sub(self.first)?)?;
        (slot != Self::EMPTY && port == addr.port()).then(|| V::from_slot(slot))
    }
}

/// A node of the built network.
#[derive(Debug)]
pub(crate) enum Node {
    /// Hosts endpoints; sends everything through its one uplink.
    Host {
        endpoints: AddrTable<EndpointId>,
        uplink: LinkId,
    },
    /// Forwards by destination address.
    Router { routes: AddrTable<LinkId> },
}

/// One link of the built network: where it goes and what it is.
#[derive(Debug, Clone)]
pub(crate) struct LinkPlan {
    pub label: String,
    pub to: usize,
    pub config: LinkConfig,
    pub seed: Seed,
}

/// The built network before links are instantiated.
#[derive(Debug)]
pub(crate) struct Plan {
    pub nodes: Vec<Node>,
    pub links: Vec<LinkPlan>,
    /// Node of each endpoint, indexed by `EndpointId`.
    pub endpoint_node: Vec<usize>,
}

/// Endpoint ids are `2 * flow` (side A) and `2 * flow + 1` (side B).
pub(crate) fn endpoint_id(flow: FlowId, side: Side) -> EndpointId {
    EndpointId(flow.0 * 2 + usize::from(side == Side::B))
}

/// The label of a two-host topology's forward link (A to B); its seed is
/// the master seed derived with this label.
pub const FORWARD_LINK: &str = "link.forward";
/// The label of a two-host topology's reverse link (B to A).
pub const REVERSE_LINK: &str = "link.reverse";

pub(crate) fn plan(
    topology: &Topology,
    addrs: &[(SocketAddr, SocketAddr)],
    master: Seed,
) -> Result<Plan, TopologyError> {
    let flows = addrs.len();
    if flows == 0 {
        return Err(TopologyError::NoFlows);
    }
    if flows > MAX_FLOWS {
        return Err(TopologyError::TooManyFlows {
            flows,
            max: MAX_FLOWS,
        });
    }
    let mut links = Vec::new();
    let mut add_link = |label: String, from: usize, to: usize, config: &LinkConfig| {
        let seed = master.derive(&label);
        debug_assert_ne!(from, to);
        links.push(LinkPlan {
            label,
            to,
            config: config.clone(),
            seed,
        });
        LinkId(links.len() - 1)
    };
    let mut endpoint_node = vec![0; flows * 2];
    let nodes = match topology {
        Topology::TwoHost { forward, reverse } => {
            let fwd = add_link(FORWARD_LINK.into(), 0, 1, forward);
            let rev = add_link(REVERSE_LINK.into(), 1, 0, reverse);
            let mut left = Vec::with_capacity(flows);
            let mut right = Vec::with_capacity(flows);
            for (i, (a, b)) in addrs.iter().enumerate() {
                left.push((*a, endpoint_id(FlowId(i), Side::A)));
                right.push((*b, endpoint_id(FlowId(i), Side::B)));
                endpoint_node[endpoint_id(FlowId(i), Side::A).0] = 0;
                endpoint_node[endpoint_id(FlowId(i), Side::B).0] = 1;
            }
            vec![
                Node::Host {
                    endpoints: AddrTable::new(left),
                    uplink: fwd,
                },
                Node::Host {
                    endpoints: AddrTable::new(right),
                    uplink: rev,
                },
            ]
        }
        Topology::Dumbbell(d) => {
            if d.access.len() != flows {
                return Err(TopologyError::AccessCount {
                    flows,
                    access: d.access.len(),
                });
            }
            // Nodes: A hosts 0..n, B hosts n..2n, left router 2n, right router 2n+1.
            let (left, right) = (2 * flows, 2 * flows + 1);
            let fwd = add_link(
                "link.bottleneck.forward".into(),
                left,
                right,
                &d.bottleneck_forward,
            );
            let rev = add_link(
                "link.bottleneck.reverse".into(),
                right,
                left,
                &d.bottleneck_reverse,
            );
            let mut nodes = Vec::with_capacity(2 * flows + 2);
            let mut left_routes = Vec::with_capacity(2 * flows);
            let mut right_routes = Vec::with_capacity(2 * flows);
            let mut b_hosts = Vec::new();
            for (i, (access, (a, b))) in d.access.iter().zip(addrs).enumerate() {
                let a_up = add_link(format!("link.flow{i}.a.up"), i, left, &access.a);
                let a_down = add_link(format!("link.flow{i}.a.down"), left, i, &access.a);
                let b_up = add_link(format!("link.flow{i}.b.up"), flows + i, right, &access.b);
                let b_down = add_link(format!("link.flow{i}.b.down"), right, flows + i, &access.b);
                left_routes.extend([(*a, a_down), (*b, fwd)]);
                right_routes.extend([(*b, b_down), (*a, rev)]);
                let ea = endpoint_id(FlowId(i), Side::A);
                let eb = endpoint_id(FlowId(i), Side::B);
                endpoint_node[ea.0] = i;
                endpoint_node[eb.0] = flows + i;
                nodes.push(Node::Host {
                    endpoints: AddrTable::new([(*a, ea)]),
                    uplink: a_up,
                });
                b_hosts.push(Node::Host {
                    endpoints: AddrTable::new([(*b, eb)]),
                    uplink: b_up,
                });
            }
            nodes.extend(b_hosts);
            nodes.push(Node::Router {
                routes: AddrTable::new(left_routes),
            });
            nodes.push(Node::Router {
                routes: AddrTable::new(right_routes),
            });
            nodes
        }
    };
    for l in &links {
        l.config.validate().map_err(|e| TopologyError::BadLink {
            label: l.label.clone(),
            error: e.to_string(),
        })?;
    }
    Ok(Plan {
        nodes,
        links,
        endpoint_node,
    })
}
