// Command pionpeer is an interop peer for thinstream built on pion/sctp: SCTP
// over UDP (RFC 6951, the SCTP packet is the whole UDP payload). pion's
// association runs over any net.Conn, so the client uses a connected UDP
// socket and the server a UDP socket locked to the first peer it hears from.
//
//	pionpeer server --listen 127.0.0.1:PORT --mode echo|discard [--count N] [--unordered] [--latency FILE]
//	pionpeer client --to 127.0.0.1:PORT --count N --size S|MIN..MAX --interval D [--unordered] [--streams K] [--ppid P] [--one-way]
//
// One-way latency (bench/thin-latency): the client with --one-way writes
// its send time (Unix nanoseconds, same host clock) into bytes 8..16 of
// each message and does not wait for echoes; the server with --latency
// appends each message's delivery latency in milliseconds to FILE, one a
// line.
//
// Both print one JSON summary line on stdout and exit non-zero on any problem.
// pion uses SCTP port 5000 on both sides. Set PION_LOG_SCTP=debug for pion's
// own log on stderr.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pion/logging"
	"github.com/pion/sctp"
)

// maxMessage bounds message sizes (pion's default maximum message size).
const maxMessage = 65536

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: pionpeer server|client [flags] (-h for flags)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "server":
		err = server(os.Args[2:])
	case "client":
		err = client(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q (want server or client)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pionpeer:", err)
		os.Exit(1)
	}
}

// printJSON writes v as one line on stdout.
func printJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
}

// peerConn is a net.Conn over an unconnected UDP socket: it accepts
// datagrams from the first sender only and writes back to it.
type peerConn struct {
	*net.UDPConn
	mu   sync.Mutex
	peer *net.UDPAddr
}

func (c *peerConn) Read(b []byte) (int, error) {
	for {
		n, from, err := c.ReadFromUDP(b)
		if err != nil {
			return n, err
		}
		c.mu.Lock()
		if c.peer == nil {
			c.peer = from
		}
		same := c.peer.IP.Equal(from.IP) && c.peer.Port == from.Port
		c.mu.Unlock()
		if same {
			return n, nil
		}
	}
}

func (c *peerConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	peer := c.peer
	c.mu.Unlock()
	if peer == nil {
		return 0, errors.New("no peer yet")
	}
	return c.WriteToUDP(b, peer)
}

func (c *peerConn) RemoteAddr() net.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.peer == nil {
		return nil
	}
	return c.peer
}

type serverReport struct {
	Mode     string `json:"mode"`
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	Echoed   uint64 `json:"echoed"`
	Streams  int    `json:"streams"`
	Error    string `json:"error,omitempty"`
}

func server(args []string) error {
	fs := flag.NewFlagSet("server", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:9899", "local UDP address")
	mode := fs.String("mode", "echo", "echo or discard")
	count := fs.Uint64("count", 0, "end the association after this many messages (0: when the peer ends it)")
	unordered := fs.Bool("unordered", false, "echo unordered (pion does not report a message's U bit)")
	deadline := fs.Duration("deadline", 60*time.Second, "give up after this long")
	latency := fs.String("latency", "", "append one-way latencies (ms) of timestamped messages to this file")
	_ = fs.Parse(args)
	var latOut *os.File
	if *latency != "" {
		f, err := os.Create(*latency)
		if err != nil {
			return err
		}
		defer f.Close()
		latOut = f
	}
	if *mode != "echo" && *mode != "discard" {
		return fmt.Errorf("--mode must be echo or discard, not %q", *mode)
	}
	addr, err := net.ResolveUDPAddr("udp", *listen)
	if err != nil {
		return err
	}
	udp, err := net.ListenUDP("udp", addr)
	if err != nil {
		return err
	}
	conn := &peerConn{UDPConn: udp}
	var mu sync.Mutex // guards rep
	rep := serverReport{Mode: *mode}
	timer := time.AfterFunc(*deadline, func() {
		mu.Lock()
		rep.Error = "deadline reached"
		mu.Unlock()
		_ = udp.Close() // ends the handshake or the association's read loop
	})
	defer timer.Stop()

	assoc, err := sctp.ServerWithOptions(
		sctp.WithNetConn(conn),
		sctp.WithLoggerFactory(logging.NewDefaultLoggerFactory()),
	)
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	// After --count messages: a graceful end (SHUTDOWN), bounded.
	reached := make(chan struct{})
	var reachedOnce sync.Once
	go func() {
		<-reached
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = assoc.Shutdown(ctx)
		_ = assoc.Close()
	}()
	var wg sync.WaitGroup
	for {
		stream, err := assoc.AcceptStream()
		if err != nil {
			break // the association ended
		}
		mu.Lock()
		rep.Streams++
		mu.Unlock()
		if *unordered {
			stream.SetReliabilityParams(true, sctp.ReliabilityTypeReliable, 0)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, maxMessage)
			for {
				n, p, err := stream.ReadSCTP(buf)
				if err != nil {
					return
				}
				mu.Lock()
				if latOut != nil && n >= 16 {
					sent := int64(binary.LittleEndian.Uint64(buf[8:16]))
					fmt.Fprintf(latOut, "%.3f\n", float64(time.Now().UnixNano()-sent)/1e6)
				}
				rep.Messages++
				rep.Bytes += uint64(n)
				last := *count > 0 && rep.Messages >= *count
				mu.Unlock()
				if *mode == "echo" {
					if _, err := stream.WriteSCTP(buf[:n], p); err != nil {
						return
					}
					mu.Lock()
					rep.Echoed++
					mu.Unlock()
				}
				if last {
					reachedOnce.Do(func() { close(reached) })
				}
			}
		}()
	}
	wg.Wait()
	_ = assoc.Close()
	mu.Lock()
	defer mu.Unlock()
	printJSON(rep)
	if rep.Error != "" {
		return errors.New(rep.Error)
	}
	return nil
}

// payload is message i's content: i (little endian, cut to size) then a
// pattern seeded by i, so any corruption or swap is detectable.
func payload(i uint64, size int) []byte {
	p := make([]byte, size)
	var idx [8]byte
	binary.LittleEndian.PutUint64(idx[:], i)
	k := copy(p, idx[:])
	b := byte(i * 31)
	for ; k < size; k++ {
		p[k] = b
		b += 7
	}
	return p
}

// sizeOf is message i's size: fixed, or spread over [min, max] by a hash of i.
func sizeOf(i uint64, lo, hi int) int {
	if lo == hi {
		return lo
	}
	h := (i + 1) * 0x9E3779B97F4A7C15
	h ^= h >> 29
	return lo + int(h%uint64(hi-lo+1))
}

func parseSize(s string) (int, int, error) {
	lo, hi, rng := strings.Cut(s, "..")
	if !rng {
		hi = lo
	}
	a, err1 := strconv.Atoi(lo)
	b, err2 := strconv.Atoi(hi)
	if err1 != nil || err2 != nil || a < 1 || b < a || b > maxMessage {
		return 0, 0, fmt.Errorf("bad --size %q (want N or MIN..MAX within 1..%d)", s, maxMessage)
	}
	return a, b, nil
}

type clientReport struct {
	Sent       uint64  `json:"sent"`
	Echoed     uint64  `json:"echoed"`
	Corrupted  uint64  `json:"corrupted"`
	OutOfOrder uint64  `json:"out_of_order"`
	BadPPID    uint64  `json:"bad_ppid"`
	BytesSent  uint64  `json:"bytes_sent"`
	RTTp50ms   float64 `json:"rtt_p50_ms"`
	RTTp99ms   float64 `json:"rtt_p99_ms"`
	RTTmaxms   float64 `json:"rtt_max_ms"`
	ElapsedS   float64 `json:"elapsed_s"`
	Error      string  `json:"error,omitempty"`
}

type echo struct {
	stream uint16
	data   []byte
	ppid   sctp.PayloadProtocolIdentifier
	at     time.Time
}

func client(args []string) error {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	to := fs.String("to", "127.0.0.1:9899", "the peer's UDP address")
	count := fs.Uint64("count", 100, "messages to send")
	sizeArg := fs.String("size", "100", "message size: N or MIN..MAX")
	interval := fs.Duration("interval", 10*time.Millisecond, "time between messages")
	unordered := fs.Bool("unordered", false, "send unordered messages")
	streams := fs.Int("streams", 1, "spread messages round robin over this many streams")
	ppidArg := fs.Uint("ppid", uint(sctp.PayloadTypeWebRTCBinary), "payload protocol identifier to send and expect back")
	deadline := fs.Duration("deadline", 60*time.Second, "give up after this long")
	oneWay := fs.Bool("one-way", false, "timestamp messages (bytes 8..16) and do not wait for echoes")
	_ = fs.Parse(args)
	ppid := sctp.PayloadProtocolIdentifier(*ppidArg)
	lo, hi, err := parseSize(*sizeArg)
	if err != nil {
		return err
	}
	if *oneWay && lo < 16 {
		return errors.New("--one-way needs messages of at least 16 bytes")
	}
	if *count == 0 || *streams < 1 || *streams > 65535 {
		return errors.New("--count must be >= 1 and --streams within 1..65535")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *deadline)
	defer cancel()

	raddr, err := net.ResolveUDPAddr("udp", *to)
	if err != nil {
		return err
	}
	conn, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return err
	}
	defer conn.Close()
	assoc, err := sctp.ClientContext(ctx,
		sctp.WithNetConn(conn),
		sctp.WithLoggerFactory(logging.NewDefaultLoggerFactory()),
	)
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	start := time.Now()

	echoes := make(chan echo, 1024)
	ss := make([]*sctp.Stream, *streams)
	for i := range ss {
		s, err := assoc.OpenStream(uint16(i), ppid)
		if err != nil {
			return err
		}
		if *unordered {
			s.SetReliabilityParams(true, sctp.ReliabilityTypeReliable, 0)
		}
		ss[i] = s
		go func() {
			for {
				buf := make([]byte, maxMessage)
				n, p, err := s.ReadSCTP(buf)
				if err != nil {
					return
				}
				select {
				case echoes <- echo{s.StreamIdentifier(), buf[:n], p, time.Now()}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}

	var rep clientReport
	outstanding := map[string][]uint64{} // content -> indices, oldest first
	sentAt := make([]time.Time, *count)
	lastEchoed := make([]int64, *streams) // per stream, -1: none yet
	for i := range lastEchoed {
		lastEchoed[i] = -1
	}
	var rtts []time.Duration
	next := uint64(0)
	tick := time.NewTimer(0)
	defer tick.Stop()
	for rep.Echoed+rep.Corrupted < *count && rep.Error == "" {
		if *oneWay && next >= *count {
			break
		}
		sending := next < *count
		var due <-chan time.Time
		if sending {
			due = tick.C
		}
		select {
		case <-due:
			size := sizeOf(next, lo, hi)
			body := payload(next, size)
			stream := ss[next%uint64(*streams)]
			sentAt[next] = time.Now()
			if *oneWay {
				binary.LittleEndian.PutUint64(body[8:16], uint64(sentAt[next].UnixNano()))
			}
			if _, err := stream.WriteSCTP(body, ppid); err != nil {
				rep.Error = fmt.Sprintf("sending message %d: %v", next, err)
				break
			}
			outstanding[string(body)] = append(outstanding[string(body)], next)
			rep.Sent++
			rep.BytesSent += uint64(size)
			next++
			if next < *count {
				tick.Reset(time.Until(start.Add(time.Duration(next) * *interval)))
			}
		case e := <-echoes:
			q := outstanding[string(e.data)]
			if len(q) == 0 {
				rep.Corrupted++
				continue
			}
			i := q[0]
			if len(q) == 1 {
				delete(outstanding, string(e.data))
			} else {
				outstanding[string(e.data)] = q[1:]
			}
			rep.Echoed++
			rtts = append(rtts, e.at.Sub(sentAt[i]))
			if e.ppid != ppid {
				rep.BadPPID++
			}
			if want := uint16(i % uint64(*streams)); e.stream != want {
				rep.Corrupted++ // came back on another stream
			} else if !*unordered {
				if int64(i) < lastEchoed[e.stream] {
					rep.OutOfOrder++
				}
				lastEchoed[e.stream] = max(lastEchoed[e.stream], int64(i))
			}
		case <-ctx.Done():
			rep.Error = fmt.Sprintf("deadline: %d of %d echoes after %v", rep.Echoed, *count, *deadline)
		}
	}
	rep.ElapsedS = time.Since(start).Seconds()
	if len(rtts) > 0 {
		sort.Slice(rtts, func(a, b int) bool { return rtts[a] < rtts[b] })
		pct := func(p float64) float64 {
			return float64(rtts[int(p*float64(len(rtts)-1)+0.5)].Microseconds()) / 1000
		}
		rep.RTTp50ms, rep.RTTp99ms, rep.RTTmaxms = pct(0.50), pct(0.99), pct(1)
	}
	// Graceful end: SHUTDOWN once everything is acknowledged.
	// One-way runs end when the last message is acknowledged: allow the
	// loss recovery of a lossy path (the server's deadline bounds it too).
	grace := 5 * time.Second
	if *oneWay {
		grace = 120 * time.Second
	}
	sctx, scancel := context.WithTimeout(context.Background(), grace)
	defer scancel()
	if err := assoc.Shutdown(sctx); err != nil && rep.Error == "" {
		rep.Error = fmt.Sprintf("shutdown: %v", err)
	}
	_ = assoc.Close()
	printJSON(rep)
	switch {
	case rep.Error != "":
		return errors.New(rep.Error)
	case *oneWay:
		return nil // delivery is checked at the server (--latency)
	case rep.Echoed != *count || rep.Corrupted+rep.OutOfOrder+rep.BadPPID > 0:
		return errors.New("echo check failed")
	}
	return nil
}
