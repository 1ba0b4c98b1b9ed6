//! Many associations behind one local address: the listener that answers
//! INITs statelessly (§5.1.3) and the demultiplexer of incoming packets.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::SocketAddr;

use bytes::Bytes;
use thinstream_base::drive::{AppEvent, Outgoing, SendError, Transport};
use thinstream_base::trace::Record;
use thinstream_base::{Datagram, Instant, Rng, Seed};

use crate::association::{answer_init_statelessly, ootb_response, Association, SendParams, State};
use crate::config::Config;
use crate::cookie::CookieKey;
use crate::trace::Stats;
use crate::wire::{Chunk, Packet};

/// Identifies one association of an [`Endpoint`]; never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AssociationId(pub u64);

/// Hashes an [`AssociationId`] (a counter the endpoint hands out, never
/// chosen by a peer) with one multiplication: ids are sequential, so
/// their low bits already differ, and the multiplication spreads them
/// into the high bits a hash table also reads. Deterministic: no random
/// state, and nothing iterates the maps keyed by it in hash order.
#[derive(Clone, Copy, Debug, Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by association id: O(1) lookups however many
/// associations an endpoint has (a B-tree walked four or five nodes per
/// lookup with a thousand, several lookups per packet).
pub type IdMap<V> = HashMap<AssociationId, V, BuildHasherDefault<IdHasher>>;

/// One live association and what the endpoint indexes of it.
struct Entry {
    assoc: Box<Association>,
    /// The (peer address, peer port, our tag, our port) it is indexed under.
    key: Option<(SocketAddr, u16, u32, u16)>,
    /// `Endpoint::index_epoch` when both lookups last named this
    /// association under `key`.
    indexed_at: u64,
    /// Its deadline as entered in `Endpoint::timers`.
    timer: Option<Instant>,
}

/// A small ordered set of association ids: a sorted vector. The sets it
/// holds (associations with something to send, to deliver or to trace)
/// rarely hold more than the associations one batch of datagrams touched,
/// and go from empty to one member and back on every round trip of a
/// thin stream; a B-tree set allocated and freed a node each time.
#[derive(Debug, Default)]
struct IdSet(Vec<AssociationId>);

impl IdSet {
    fn insert(&mut self, id: AssociationId) {
        // Ids mostly arrive in order (one association, or a batch walked
        // by id): check the end first.
        match self.0.last() {
            None => self.0.push(id),
            Some(&last) if last < id => self.0.push(id),
            Some(&last) if last == id => {}
            Some(_) => {
                if let Err(at) = self.0.binary_search(&id) {
                    self.0.insert(at, id);
                }
            }
        }
    }
    fn remove(&mut self, id: AssociationId) {
        if let Ok(at) = self.0.binary_search(&id) {
            self.0.remove(at);
        }
    }
    fn contains(&self, id: AssociationId) -> bool {
        self.0.binary_search(&id).is_ok()
    }
    fn first(&self) -> Option<AssociationId> {
        self.0.first().copied()
    }
    /// The smallest member at or above `from`.
    fn first_from(&self, from: AssociationId) -> Option<AssociationId> {
        let at = self.0.partition_point(|&x| x < from);
        self.0.get(at).copied()
    }
    /// Some member, taken out (the largest: no element moves).
    fn pop(&mut self) -> Option<AssociationId> {
        self.0.pop()
    }
    fn iter(&self) -> impl Iterator<Item = AssociationId> + '_ {
        self.0.iter().copied()
    }
}

/// The key of the peer-facing lookups: the peer's address, then two
/// 16-bit and one 32-bit field (ports, tag). Equality compares all of the
/// address (an IPv6 address's flow label and scope too); the hash reads
/// the address bits and the packed fields in two writes instead of one
/// per field, which is most of a lookup's cost with a keyed hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PeerKey {
    addr: SocketAddr,
    /// The two 16-bit fields and the 32-bit one, packed.
    rest: u64,
}

impl PeerKey {
    fn new(addr: SocketAddr, a: u16, b: u16, c: u32) -> Self {
        PeerKey {
            addr,
            rest: (u64::from(a) << 48) | (u64::from(b) << 32) | u64::from(c),
        }
    }
}

impl std::hash::Hash for PeerKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let (ip, port) = match self.addr {
            SocketAddr::V4(a) => (u128::from(a.ip().to_bits()), a.port()),
            SocketAddr::V6(a) => (a.ip().to_bits(), a.port()),
        };
        // Address bits and port in one word, the packed fields in the
        // other; equal keys give equal words.
        h.write_u128(ip ^ (u128::from(port) << 112));
        h.write_u64(self.rest);
    }
}

impl fmt::Display for AssociationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "assoc{}", self.0)
    }
}

/// One local address serving any number of peers.
///
/// Incoming packets are routed by (source address, source SCTP port,
/// verification tag); INIT, COOKIE ECHO and T-bit packets fall back to the
/// source address and port. An association is named by both addresses and
/// both SCTP ports (RFC 9260 §1.5.2, §8.5): a packet whose tag matches an
/// association but whose ports do not is not routed to it (it is
/// out of the blue, or discarded when addressed to another local port). An INIT
/// from an unknown peer is answered with a signed cookie and nothing is
/// stored; the association is created only by a valid COOKIE ECHO.
///
/// # Drive contract
/// Same loop as [`Association`] (see `thinstream_base::drive`): after each
/// input ([`Endpoint::handle_datagram`], [`Endpoint::handle_timeout`],
/// [`Endpoint::connect`], [`Endpoint::send`], [`Endpoint::close`],
/// [`Endpoint::abort`]) drain [`Endpoint::poll_transmit`] until `None`,
/// [`Endpoint::poll_event`] and [`Endpoint::poll_trace`] until `None`, then
/// wait for the next datagram or [`Endpoint::poll_timeout`]. A new incoming
/// association announces itself with `(id, AppEvent::Established)`; a
/// closed association reports `(id, AppEvent::Closed { .. })` and is
/// removed once its last datagram, event and record are drained.
///
/// # Cost with many associations
/// Finding an association (by id, or by address, port and tag for an
/// incoming packet) costs O(1); keeping its deadline in order costs
/// O(log n) in the number of associations. Beyond that an operation costs
/// the work of the associations it touches: the endpoint remembers which
/// associations received an input since they were last drained (only
/// those are polled).
pub struct Endpoint {
    config: Config,
    local: SocketAddr,
    seed: Seed,
    rng: Rng,
    key: CookieKey,
    accept: bool,
    assocs: IdMap<Entry>,
    /// (peer address, peer SCTP port, our tag) -> association. Keys come
    /// partly from peers, so these two use the standard library's keyed
    /// hash (its random key changes no result: they are only looked up).
    by_tag: HashMap<PeerKey, AssociationId>,
    /// (peer address, peer SCTP port, our SCTP port) -> association: one
    /// association per pair of SCTP transport addresses (RFC 9260 §1.4).
    by_addr: HashMap<PeerKey, AssociationId>,
    /// Bumped whenever `by_tag` or `by_addr` changes: an association whose
    /// keys did not change and that was last checked in the current epoch
    /// is still what both lookups name (no hashing per packet).
    index_epoch: u64,
    out: VecDeque<Datagram>,
    trace: VecDeque<Record>,
    stats: Stats,
    next_id: u64,
    /// Time of the input being processed (for endpoint-level records).
    now_hint: Instant,
    /// Round-robin position of `poll_transmit`.
    rr: AssociationId,
    /// Where secrets come from when they must be unpredictable (see
    /// [`Endpoint::with_entropy`]); `None`: everything derives from `seed`.
    entropy: Option<Entropy>,
    /// Associations that may have a datagram / an event / a trace record
    /// to give: every input marks its association in all three.
    tx_ready: IdSet,
    app_ready: IdSet,
    trace_ready: IdSet,
    /// Every association's next deadline (also kept in its entry),
    /// ordered by time.
    timers: BTreeSet<(Instant, AssociationId)>,
    /// Associations lent out by `association_mut`: anything may have
    /// changed; re-examined before the next operation.
    lent: IdSet,
    /// A chunk list to parse the next datagram into, taken back from the
    /// association that handled the last one.
    scratch_rx: Vec<Chunk>,
}

/// A source of unpredictable bytes (the OS random source in real use). The
/// protocol core never reads one itself: the caller passes it in.
pub type Entropy = Box<dyn FnMut(&mut [u8]) + Send>;

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("local", &self.local)
            .field("associations", &self.assocs.len())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An endpoint bound to `local`. `accept_incoming`: answer INITs from
    /// unknown peers (a server); otherwise only [`Endpoint::connect`]
    /// creates associations. The cookie secret, tags and TSNs come from `seed`.
    pub fn new(config: Config, local: SocketAddr, seed: Seed, accept_incoming: bool) -> Self {
        let mut rng = seed.derive("endpoint").rng();
        let key = CookieKey::generate(&mut rng, config.valid_cookie_life);
        Endpoint {
            config,
            local,
            seed,
            rng,
            key,
            accept: accept_incoming,
            assocs: IdMap::default(),
            by_tag: HashMap::new(),
            by_addr: HashMap::new(),
            index_epoch: 0,
            out: VecDeque::new(),
            trace: VecDeque::new(),
            stats: Stats::default(),
            next_id: 0,
            now_hint: Instant::ZERO,
            scratch_rx: Vec::new(),
            rr: AssociationId(0),
            entropy: None,
            tx_ready: IdSet::default(),
            app_ready: IdSet::default(),
            trace_ready: IdSet::default(),
            timers: BTreeSet::new(),
            lent: IdSet::default(),
        }
    }

    /// An endpoint whose cookie secret, and every association's tags and
    /// initial TSNs, come fresh from `entropy` (32 bytes for the secret, 8
    /// bytes per association and per stateless INIT ACK) instead of from a
    /// seed, so nothing an observer sees predicts the next value. The
    /// randomness each association uses afterwards derives from its own
    /// fresh 64-bit seed.
    pub fn with_entropy(
        config: Config,
        local: SocketAddr,
        accept_incoming: bool,
        mut entropy: Entropy,
    ) -> Self {
        let mut seed = [0u8; 8];
        entropy(&mut seed);
        let mut ep = Endpoint::new(
            config,
            local,
            Seed(u64::from_le_bytes(seed)),
            accept_incoming,
        );
        let mut secret = [0u8; 32];
        entropy(&mut secret);
        ep.key = CookieKey::from_secret(secret, ep.config.valid_cookie_life);
        ep.entropy = Some(entropy);
        ep
    }

    /// A fresh seed from the entropy source, if there is one.
    fn fresh_seed(&mut self) -> Option<Seed> {
        let e = self.entropy.as_mut()?;
        let mut b = [0u8; 8];
        e(&mut b);
        Some(Seed(u64::from_le_bytes(b)))
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// Endpoint-level counters (packets no association took, stateless
    /// answers).
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// Endpoint-level counters plus those of every live association.
    pub fn total_stats(&self) -> Stats {
        let mut s = self.stats;
        #[allow(
            clippy::iter_over_hash_type,
            reason = "integer counters are summed: the order does not matter"
        )]
        for e in self.assocs.values() {
            s.add(e.assoc.stats());
        }
        s
    }
    /// Whether an association with this peer address and these SCTP ports
    /// exists (a second one would be the same association, RFC 9260 §1.4).
    pub fn has_association_with(
        &self,
        remote: SocketAddr,
        peer_port: u16,
        local_port: u16,
    ) -> bool {
        self.by_addr
            .contains_key(&PeerKey::new(remote, peer_port, local_port, 0))
    }

    /// Live associations, in id order.
    pub fn associations(&self) -> impl Iterator<Item = AssociationId> + '_ {
        let mut ids: Vec<AssociationId> = self.assocs.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter()
    }
    /// How many associations are live.
    pub fn association_count(&self) -> usize {
        self.assocs.len()
    }
    pub fn association(&self, id: AssociationId) -> Option<&Association> {
        self.assocs.get(&id).map(|e| &*e.assoc)
    }
    pub fn association_mut(&mut self, id: AssociationId) -> Option<&mut Association> {
        if self.assocs.contains_key(&id) {
            self.lent.insert(id);
        }
        self.assocs.get_mut(&id).map(|e| &mut *e.assoc)
    }
    fn assoc_mut(&mut self, id: AssociationId) -> Option<&mut Association> {
        self.assocs.get_mut(&id).map(|e| &mut *e.assoc)
    }

    /// Association `id` received an input: it may have output, and its
    /// timers may have moved.
    fn touched(&mut self, id: AssociationId) {
        if self.note_output(id) {
            self.tx_ready.insert(id);
        }
    }

    /// Index what association `id` has for the application and the trace,
    /// and its deadline (sets change only when something is there, so the
    /// common path allocates nothing). False if `id` is unknown.
    fn note_output(&mut self, id: AssociationId) -> bool {
        let Some(e) = self.assocs.get_mut(&id) else {
            return false;
        };
        let a = &e.assoc;
        let (app, trace, deadline) = (a.has_app_events(), a.has_trace_records(), a.poll_timeout());
        let old = std::mem::replace(&mut e.timer, deadline);
        if app {
            self.app_ready.insert(id);
        }
        if trace {
            self.trace_ready.insert(id);
        }
        if old != deadline {
            if let Some(old) = old {
                self.timers.remove(&(old, id));
            }
            if let Some(t) = deadline {
                self.timers.insert((t, id));
            }
        }
        true
    }

    /// Treat associations lent by `association_mut` as touched.
    fn settle(&mut self) {
        while let Some(id) = self.lent.pop() {
            self.touched(id);
        }
    }

    /// Remove association `id` if it has ended and nothing of it is left
    /// to drain.
    fn maybe_reap(&mut self, id: AssociationId) {
        let dead = self
            .assocs
            .get(&id)
            .is_some_and(|e| e.assoc.is_closed() && !e.assoc.has_pending_output())
            && !self.tx_ready.contains(id);
        if dead {
            let Some(e) = self.assocs.remove(&id) else {
                return;
            };
            self.unindex(id, e.key);
            self.app_ready.remove(id);
            self.trace_ready.remove(id);
            if let Some(t) = e.timer {
                self.timers.remove(&(t, id));
            }
        }
    }

    /// Change one association's mechanisms (see
    /// [`Association::set_mechanisms`]); false if `id` is unknown. New
    /// associations take the endpoint config's mechanisms.
    pub fn set_mechanisms(
        &mut self,
        id: AssociationId,
        mechanisms: crate::mechanism::Mechanisms,
    ) -> bool {
        self.settle();
        let found = match self.assoc_mut(id) {
            Some(a) => {
                a.set_mechanisms(mechanisms);
                true
            }
            None => false,
        };
        self.touched(id);
        found
    }

    fn alloc_id(&mut self) -> (AssociationId, Seed) {
        let id = AssociationId(self.next_id);
        self.next_id += 1;
        let seed = match self.fresh_seed() {
            Some(s) => s,
            None => self.seed.derive(&format!("association-{}", id.0)),
        };
        (id, seed)
    }

    /// Open an association to `remote` (INIT goes out on the next poll).
    pub fn connect(&mut self, now: Instant, remote: SocketAddr) -> AssociationId {
        self.connect_with(now, remote, self.config.clone())
    }

    /// Open an association to `remote` with its own configuration (the
    /// endpoint's configuration stays the one for incoming associations).
    pub fn connect_with(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        config: Config,
    ) -> AssociationId {
        let (id, seed) = self.alloc_id();
        let a =
            Association::connect_with_key(config, now, self.local, remote, seed, self.key.clone());
        self.settle();
        self.insert(id, a);
        id
    }

    /// Queue a message on association `id`.
    pub fn send(
        &mut self,
        now: Instant,
        id: AssociationId,
        m: Outgoing<'_>,
    ) -> Result<u64, SendError> {
        self.settle();
        let r = match self.assoc_mut(id) {
            Some(a) => a.send(now, m),
            None => Err(SendError::NotConnected),
        };
        self.touched(id);
        r
    }

    /// Queue a message on association `id` with the options of
    /// [`SendParams`] (PPID, partial reliability; see
    /// [`Association::send_with`]).
    pub fn send_with(
        &mut self,
        now: Instant,
        id: AssociationId,
        params: &SendParams,
        payload: &[u8],
    ) -> Result<u64, SendError> {
        self.settle();
        let r = match self.assoc_mut(id) {
            Some(a) => a.send_with(now, params, payload),
            None => Err(SendError::NotConnected),
        };
        self.touched(id);
        r
    }

    /// Graceful shutdown of association `id`.
    pub fn close(&mut self, now: Instant, id: AssociationId) {
        self.settle();
        if let Some(a) = self.assoc_mut(id) {
            a.close(now);
        }
        self.touched(id);
    }

    /// ABORT association `id`.
    pub fn abort(&mut self, now: Instant, id: AssociationId, reason: &str) {
        self.settle();
        if let Some(a) = self.assoc_mut(id) {
            a.abort(now, reason);
        }
        self.touched(id);
    }

    fn reindex(&mut self, id: AssociationId) {
        let epoch = self.index_epoch;
        let Some(e) = self.assocs.get(&id) else {
            return;
        };
        let a = &e.assoc;
        let current = a
            .remote_addr()
            .map(|addr| (addr, a.peer_port(), a.local_tag(), a.config().local_port));
        if e.key.is_some() && e.key == current && e.indexed_at == epoch {
            // Same keys, and no lookup changed since they were checked:
            // both still name this association (every packet but the
            // handshake's, with no other association coming or going).
            return;
        }
        if let Some(key @ (addr, port, tag, local_port)) = current {
            if e.key == Some(key) {
                // The keys are the ones indexed: only make sure both
                // lookups still name this association, as the full
                // re-insertion below would.
                let (t, k) = (
                    PeerKey::new(addr, port, 0, tag),
                    PeerKey::new(addr, port, local_port, 0),
                );
                if self.by_tag.get(&t) != Some(&id) {
                    self.by_tag.insert(t, id);
                    self.index_epoch += 1;
                }
                if self.by_addr.get(&k) != Some(&id) {
                    self.by_addr.insert(k, id);
                    self.index_epoch += 1;
                }
                let epoch = self.index_epoch;
                if let Some(e) = self.assocs.get_mut(&id) {
                    e.indexed_at = epoch;
                }
                return;
            }
        }
        let old = e.key;
        self.unindex(id, old);
        if let Some((addr, port, tag, local_port)) = current {
            self.by_tag.insert(PeerKey::new(addr, port, 0, tag), id);
            self.by_addr
                .insert(PeerKey::new(addr, port, local_port, 0), id);
            self.index_epoch += 1;
        }
        let epoch = self.index_epoch;
        if let Some(e) = self.assocs.get_mut(&id) {
            e.key = current;
            e.indexed_at = epoch;
        }
    }

    /// Remove association `id`'s index entries under `key`.
    fn unindex(&mut self, id: AssociationId, key: Option<(SocketAddr, u16, u32, u16)>) {
        if let Some((addr, port, tag, local_port)) = key {
            self.by_tag.remove(&PeerKey::new(addr, port, 0, tag));
            let k = PeerKey::new(addr, port, local_port, 0);
            if self.by_addr.get(&k) == Some(&id) {
                self.by_addr.remove(&k);
            }
            self.index_epoch += 1;
        }
    }

    /// Enter a new association and index it.
    fn insert(&mut self, id: AssociationId, a: Association) {
        self.assocs.insert(
            id,
            Entry {
                assoc: Box::new(a),
                key: None,
                indexed_at: 0,
                timer: None,
            },
        );
        self.reindex(id);
        self.touched(id);
    }

    /// A datagram arrived on the endpoint's socket.
    pub fn handle_datagram(&mut self, now: Instant, d: Datagram) {
        let len = d.payload.len();
        let chunks = std::mem::take(&mut self.scratch_rx);
        let parsed = Packet::parse_bytes_reusing(&Bytes::from(d.payload), chunks);
        self.handle_parsed(now, d.src, parsed, len);
    }

    /// A datagram arrived from `src`, in a buffer the caller keeps: what
    /// the endpoint stores of it (message payloads) is copied, the rest is
    /// only read, so an I/O layer can receive into buffers it reuses.
    pub fn handle_slice(&mut self, now: Instant, src: SocketAddr, payload: &[u8]) {
        let chunks = std::mem::take(&mut self.scratch_rx);
        let parsed = Packet::parse_reusing(payload, chunks);
        self.handle_parsed(now, src, parsed, payload.len());
    }

    fn handle_parsed(
        &mut self,
        now: Instant,
        src: SocketAddr,
        parsed: Result<Packet, crate::wire::WireError>,
        len: usize,
    ) {
        self.settle();
        let packet = match parsed {
            Ok(p) => p,
            Err(_) => {
                self.stats.malformed_packets += 1;
                if self.config.trace {
                    self.trace.push_back(Record::Discarded {
                        time: now,
                        why: "malformed".into(),
                    });
                }
                return;
            }
        };
        self.now_hint = now;
        let id = self.route(src, &packet);
        if let Some(id) = id {
            // The association checks its own ports (an association opened
            // with `connect_with` may use another local SCTP port).
            if let Some(a) = self.assoc_mut(id) {
                self.scratch_rx = a.handle_packet_returning(now, src, packet, len);
            }
            self.reindex(id);
            self.touched(id);
            return;
        }
        if packet.dst_port != self.config.local_port {
            // Another SCTP port behind the same UDP socket, and no
            // association of ours uses it.
            self.stats.packets_received += 1;
            self.stats.bytes_received += len as u64;
            self.discard(now, "wrong-port");
            return;
        }
        // Not for a live association: count it here.
        self.stats.packets_received += 1;
        self.stats.bytes_received += len as u64;
        if self.config.trace {
            self.trace.push_back(Record::PacketReceived {
                time: now,
                wire_bytes: len as u32,
            });
        }
        match packet.chunks.first() {
            Some(Chunk::Init(_)) if self.accept => {
                if let Some(s) = self.fresh_seed() {
                    self.rng = s.rng();
                }
                match answer_init_statelessly(
                    &self.config,
                    &self.key,
                    &mut self.rng,
                    now,
                    src,
                    &packet,
                ) {
                    Some(p) => self.push_out(src, &p),
                    None => self.discard(now, "invalid-init"),
                }
            }
            Some(Chunk::CookieEcho(_)) if self.accept => {
                let (id, seed) = self.alloc_id();
                let mut a = Association::for_endpoint(
                    self.config.clone(),
                    self.local,
                    seed,
                    self.key.clone(),
                );
                a.handle_packet(now, src, packet, len);
                if a.state() == State::Closed {
                    // Invalid or stale cookie: keep the answers (e.g. the
                    // Stale Cookie ERROR) and the records, not the association.
                    while let Some(dg) = a.poll_transmit(now) {
                        self.out.push_back(dg);
                    }
                    while let Some(r) = a.poll_trace() {
                        self.trace.push_back(r);
                    }
                    self.stats.discarded_packets += 1;
                } else {
                    self.insert(id, a);
                }
            }
            _ => {
                self.discard(now, "out-of-the-blue");
                if let Some(p) = ootb_response(self.config.local_port, &packet) {
                    self.push_out(src, &p);
                }
            }
        }
    }

    fn route(&self, src: SocketAddr, p: &Packet) -> Option<AssociationId> {
        if let Some(id) = self
            .by_tag
            .get(&PeerKey::new(src, p.src_port, 0, p.verification_tag))
        {
            return Some(*id);
        }
        // Packets whose tag is legitimately not our tag: INIT (0), COOKIE
        // ECHO of a restart, T-bit ABORT / SHUTDOWN COMPLETE (peer's tag).
        let by_addr = match p.chunks.first()? {
            Chunk::Init(_) | Chunk::CookieEcho(_) => true,
            Chunk::Abort(a) => a.t_bit,
            Chunk::ShutdownComplete(s) => s.t_bit,
            _ => false,
        };
        if by_addr {
            self.by_addr
                .get(&PeerKey::new(src, p.src_port, p.dst_port, 0))
                .copied()
        } else {
            None
        }
    }

    fn push_out(&mut self, dst: SocketAddr, p: &Packet) {
        let mut payload = Vec::with_capacity(p.encoded_len());
        p.emit(&mut payload);
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += payload.len() as u64;
        if self.config.trace {
            self.trace.push_back(Record::PacketSent {
                time: self.now_hint,
                wire_bytes: payload.len() as u32,
                data: Default::default(),
                control: p.chunks.len() as u16,
            });
        }
        self.out.push_back(Datagram {
            src: self.local,
            dst,
            payload,
        });
    }

    fn discard(&mut self, now: Instant, why: &'static str) {
        self.stats.discarded_packets += 1;
        if self.config.trace {
            self.trace.push_back(Record::Discarded {
                time: now,
                why: why.into(),
            });
        }
    }

    /// Fire the timers that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.settle();
        let mut due = Vec::new();
        while let Some(&(t, id)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.pop_first();
            if let Some(e) = self.assocs.get_mut(&id) {
                e.timer = None;
            }
            due.push(id);
        }
        for id in due {
            if let Some(a) = self.assoc_mut(id) {
                a.handle_timeout(now);
            }
            self.touched(id);
        }
    }

    /// The next datagram to send. Associations take turns (round robin
    /// by id) so one busy association cannot starve the others.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        let mut payload = Vec::new();
        let dst = self.poll_transmit_into(now, &mut payload)?;
        Some(Datagram {
            src: self.local,
            dst,
            payload,
        })
    }

    /// Like [`Endpoint::poll_transmit`], appending the datagram to `out`
    /// (which may hold earlier ones) and returning its destination: the
    /// I/O layer batches datagrams in one buffer without allocating per
    /// datagram.
    pub fn poll_transmit_into(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<SocketAddr> {
        self.settle();
        if let Some(d) = self.out.pop_front() {
            out.extend_from_slice(&d.payload);
            return Some(d.dst);
        }
        loop {
            let id = self
                .tx_ready
                .first_from(self.rr)
                .or_else(|| self.tx_ready.first())?;
            let dst = self
                .assoc_mut(id)
                .and_then(|a| a.poll_transmit_into(now, out));
            // Sending may arm a timer or leave a record or an event.
            self.note_output(id);
            match dst {
                Some(dst) => {
                    self.rr = AssociationId(id.0 + 1);
                    return Some(dst);
                }
                None => {
                    self.tx_ready.remove(id);
                    self.maybe_reap(id);
                }
            }
        }
    }

    /// Start or stop answering INITs from unknown peers.
    pub fn set_accept_incoming(&mut self, accept: bool) {
        self.accept = accept;
    }

    /// The earliest timer of all associations.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let first = self.timers.first().map(|&(t, _)| t);
        self.lent
            .iter()
            .filter_map(|id| self.assocs.get(&id).and_then(|e| e.assoc.poll_timeout()))
            .chain(first)
            .min()
    }

    /// The next application event of any association.
    pub fn poll_event(&mut self) -> Option<(AssociationId, AppEvent)> {
        self.poll_event_unless(|_| false)
    }

    /// The next application event of an association `skip` does not
    /// exclude (an application that cannot take more of one association's
    /// messages leaves them, and its receive window, with the association).
    pub fn poll_event_unless(
        &mut self,
        mut skip: impl FnMut(AssociationId) -> bool,
    ) -> Option<(AssociationId, AppEvent)> {
        self.settle();
        let mut from = AssociationId(0);
        loop {
            let id = self.app_ready.first_from(from)?;
            from = AssociationId(id.0 + 1);
            if skip(id) {
                continue;
            }
            match self.assoc_mut(id).and_then(|a| a.poll_app()) {
                Some(e) => {
                    if matches!(e, AppEvent::Received { .. }) {
                        // Taking a message frees receive buffer: the
                        // association may owe a window update now, with no
                        // packet coming in to prompt it (the peer may be
                        // waiting for exactly that update). Index its
                        // output at the next transmit.
                        self.lent.insert(id);
                    }
                    return Some((id, e));
                }
                None => {
                    self.app_ready.remove(id);
                    self.maybe_reap(id);
                }
            }
        }
    }

    /// The next trace record: `None` for endpoint-level records.
    pub fn poll_trace(&mut self) -> Option<(Option<AssociationId>, Record)> {
        self.settle();
        if let Some(r) = self.trace.pop_front() {
            return Some((None, r));
        }
        loop {
            let id = self.trace_ready.first()?;
            match self.assoc_mut(id).and_then(|a| a.poll_trace()) {
                Some(r) => return Some((Some(id), r)),
                None => {
                    self.trace_ready.remove(id);
                    self.maybe_reap(id);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn id_set_behaves_as_an_ordered_set() {
        let mut rng = Rng::new(Seed(7));
        let mut ours = IdSet::default();
        let mut reference = BTreeSet::new();
        for _ in 0..20_000 {
            let id = AssociationId(rng.below(64));
            match rng.below(6) {
                0 | 1 => {
                    ours.insert(id);
                    reference.insert(id);
                }
                2 => {
                    ours.remove(id);
                    reference.remove(&id);
                }
                3 => {
                    // `pop` takes some member; the reference loses the same.
                    let got = ours.pop();
                    assert_eq!(got, reference.last().copied());
                    if let Some(g) = got {
                        reference.remove(&g);
                    }
                }
                4 => assert_eq!(ours.first_from(id), reference.range(id..).next().copied()),
                _ => assert_eq!(ours.contains(id), reference.contains(&id)),
            }
            assert_eq!(ours.first(), reference.first().copied());
            assert!(ours.iter().eq(reference.iter().copied()));
        }
    }

    #[test]
    fn peer_keys_hash_alike_when_equal_and_differ_by_every_field() {
        let s = std::collections::hash_map::RandomState::new();
        let a: SocketAddr = "127.0.0.1:9899".parse().unwrap();
        let k = PeerKey::new(a, 5000, 5001, 0xDEAD_BEEF);
        assert_eq!(
            s.hash_one(k),
            s.hash_one(PeerKey::new(a, 5000, 5001, 0xDEAD_BEEF))
        );
        let others = [
            PeerKey::new("127.0.0.2:9899".parse().unwrap(), 5000, 5001, 0xDEAD_BEEF),
            PeerKey::new("127.0.0.1:9898".parse().unwrap(), 5000, 5001, 0xDEAD_BEEF),
            PeerKey::new(a, 5002, 5001, 0xDEAD_BEEF),
            PeerKey::new(a, 5000, 5002, 0xDEAD_BEEF),
            PeerKey::new(a, 5000, 5001, 0xDEAD_BEEE),
            PeerKey::new("[::1]:9899".parse().unwrap(), 5000, 5001, 0xDEAD_BEEF),
        ];
        for o in others {
            assert_ne!(k, o);
            assert_ne!(s.hash_one(k), s.hash_one(o), "{o:?}");
        }
        // Equality still reads the whole IPv6 address, scope included.
        let v6: SocketAddr = "[fe80::1%2]:9899".parse().unwrap();
        let v6b: SocketAddr = "[fe80::1%3]:9899".parse().unwrap();
        assert_ne!(PeerKey::new(v6, 1, 2, 3), PeerKey::new(v6b, 1, 2, 3));
    }
}
