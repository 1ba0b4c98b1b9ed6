// Command kcppeer is a thin-stream peer built on kcp-go (KCP over UDP, no
// FEC, no encryption) for bench/thin-latency: a source that sends
// timestamped messages at a fixed interval, and a sink that records each
// message's one-way latency (same host clock).
//
//	kcppeer sink --listen 127.0.0.1:PORT --count N --latency FILE [--fast] [--deadline D]
//	kcppeer source --to 127.0.0.1:PORT --count N --size S --interval D [--fast] [--deadline D]
//
// --fast is KCP's fast mode, SetNoDelay(1, 10, 2, 1): no RTO doubling,
// a 10 ms internal clock, fast resend after 2 skipped ACKs, no congestion
// window. Without it: normal mode, SetNoDelay(0, 40, 0, 0). Both print one
// JSON line on stdout and exit non-zero on any problem.
package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	kcp "github.com/xtaci/kcp-go/v5"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kcppeer sink|source [flags] (-h for flags)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "sink":
		err = sink(os.Args[2:])
	case "source":
		err = source(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q (want sink or source)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kcppeer:", err)
		os.Exit(1)
	}
}

func tune(s *kcp.UDPSession, fast bool) {
	if fast {
		s.SetNoDelay(1, 10, 2, 1)
	} else {
		s.SetNoDelay(0, 40, 0, 0)
	}
	s.SetStreamMode(false)
}

type report struct {
	Role     string  `json:"role"`
	Messages uint64  `json:"messages"`
	Bytes    uint64  `json:"bytes"`
	ElapsedS float64 `json:"elapsed_s"`
	Error    string  `json:"error,omitempty"`
}

func finish(rep report) error {
	b, _ := json.Marshal(rep)
	fmt.Println(string(b))
	if rep.Error != "" {
		return errors.New(rep.Error)
	}
	return nil
}

func sink(args []string) error {
	fs := flag.NewFlagSet("sink", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:9899", "local UDP address")
	count := fs.Uint64("count", 100, "messages to receive")
	latency := fs.String("latency", "", "write one-way latencies (ms), one a line")
	fast := fs.Bool("fast", false, "KCP fast mode")
	deadline := fs.Duration("deadline", 120*time.Second, "give up after this long")
	_ = fs.Parse(args)
	if *latency == "" {
		return errors.New("--latency FILE is required")
	}
	out, err := os.Create(*latency)
	if err != nil {
		return err
	}
	defer out.Close()
	l, err := kcp.ListenWithOptions(*listen, nil, 0, 0)
	if err != nil {
		return err
	}
	defer l.Close()
	_ = l.SetDeadline(time.Now().Add(*deadline))
	s, err := l.AcceptKCP()
	if err != nil {
		return finish(report{Role: "sink", Error: "accept: " + err.Error()})
	}
	defer s.Close()
	tune(s, *fast)
	_ = s.SetReadDeadline(time.Now().Add(*deadline))
	start := time.Now()
	rep := report{Role: "sink"}
	buf := make([]byte, 65536)
	for rep.Messages < *count {
		n, err := s.Read(buf)
		if err != nil {
			rep.Error = fmt.Sprintf("after %d of %d messages: %v", rep.Messages, *count, err)
			break
		}
		if n < 16 {
			rep.Error = fmt.Sprintf("message %d has %d bytes (timestamped messages have at least 16)", rep.Messages, n)
			break
		}
		if seq := binary.LittleEndian.Uint64(buf[8:16]); seq != rep.Messages {
			rep.Error = fmt.Sprintf("message %d arrived where %d was due", seq, rep.Messages)
			break
		}
		sent := int64(binary.LittleEndian.Uint64(buf[0:8]))
		fmt.Fprintf(out, "%.3f\n", float64(time.Now().UnixNano()-sent)/1e6)
		rep.Messages++
		rep.Bytes += uint64(n)
	}
	rep.ElapsedS = time.Since(start).Seconds()
	if rep.Error == "" {
		// Tell the source, and linger so KCP can resend the answer and the
		// last ACKs over a lossy path.
		_, _ = s.Write([]byte{1})
		time.Sleep(5 * time.Second)
	}
	return finish(rep)
}

func source(args []string) error {
	fs := flag.NewFlagSet("source", flag.ExitOnError)
	to := fs.String("to", "127.0.0.1:9899", "the sink's UDP address")
	count := fs.Uint64("count", 100, "messages to send")
	size := fs.Int("size", 100, "message size in bytes (>= 16)")
	interval := fs.Duration("interval", 100*time.Millisecond, "time between messages")
	fast := fs.Bool("fast", false, "KCP fast mode")
	deadline := fs.Duration("deadline", 120*time.Second, "give up waiting for the sink's answer after the last send this long")
	_ = fs.Parse(args)
	if *size < 16 || *size > 60000 || *count == 0 {
		return errors.New("--size must be 16..60000 and --count >= 1")
	}
	s, err := kcp.DialWithOptions(*to, nil, 0, 0)
	if err != nil {
		return err
	}
	defer s.Close()
	tune(s, *fast)
	rep := report{Role: "source"}
	start := time.Now()
	msg := make([]byte, *size)
	for i := uint64(0); i < *count; i++ {
		if d := time.Until(start.Add(time.Duration(i) * *interval)); d > 0 {
			time.Sleep(d)
		}
		binary.LittleEndian.PutUint64(msg[0:8], uint64(time.Now().UnixNano()))
		binary.LittleEndian.PutUint64(msg[8:16], i)
		if _, err := s.Write(msg); err != nil {
			rep.Error = fmt.Sprintf("sending message %d: %v", i, err)
			return finish(rep)
		}
		rep.Messages++
		rep.Bytes += uint64(*size)
	}
	// The sink answers with one byte once it has every message (bounded).
	_ = s.SetReadDeadline(time.Now().Add(*deadline))
	if _, err := s.Read(make([]byte, 16)); err != nil {
		rep.Error = fmt.Sprintf("no end-of-run answer from the sink within %v of the last send: %v", *deadline, err)
	}
	rep.ElapsedS = time.Since(start).Seconds()
	return finish(rep)
}
