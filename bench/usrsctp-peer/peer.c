/*
 * A quiet usrsctp peer for measurements (SCTP over UDP, RFC 6951, on
 * 127.0.0.1 only). The example programs shipped with usrsctp print debug
 * output on every packet, which makes them useless as a speed reference.
 *
 *   peer sink   LOCAL_ENCAPS REMOTE_ENCAPS SCTP_PORT MAX_SECONDS
 *       accept one association on 127.0.0.1:SCTP_PORT, read until it
 *       ends (or MAX_SECONDS), print a JSON line with what arrived.
 *   peer source LOCAL_ENCAPS REMOTE_ENCAPS SCTP_PORT SIZE SECONDS
 *       connect to 127.0.0.1:SCTP_PORT, send SIZE-byte messages back to
 *       back for SECONDS, close, print a JSON line.
 *
 *   peer thinsink LOCAL_ENCAPS REMOTE_ENCAPS SCTP_PORT MAX_SECONDS OUTFILE [tuned]
 *       accept one association, write the one-way latency of each
 *       message (ms, one per line, in arrival order) to OUTFILE; the
 *       message starts with its id and its send time (CLOCK_MONOTONIC ns,
 *       both little-endian u64): sender and sink on the same host.
 *       Messages of `thinstream send`'s one-way protocol (PPID "TSO1")
 *       carry the two after a 2-byte prefix; its end-of-run messages
 *       (PPID "TSOC") are not data and are skipped.
 *       `tuned`: SACK every packet (sack_freq 1, no delayed SACK).
 *   peer thinsource LOCAL_ENCAPS REMOTE_ENCAPS SCTP_PORT COUNT INTERVAL_MS SIZE [tuned]
 *       send COUNT SIZE-byte messages, one every INTERVAL_MS (absolute
 *       schedule), with SCTP_NODELAY (no Nagle: what a thin-stream
 *       application sets). `tuned`: RTO.Min 200 ms.
 *
 * sink/source print: bytes, messages, seconds (first to last message), the
 * goodput in Mbit/s and the longest gap between two consecutive messages
 * in ms (a stall detector). Built by bench/bulk; not part of the library.
 */
#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <usrsctp.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void set_encaps(struct socket *s, uint16_t remote) {
    struct sctp_udpencaps enc;
    memset(&enc, 0, sizeof enc);
    enc.sue_address.ss_family = AF_INET;
    enc.sue_port = htons(remote);
    if (usrsctp_setsockopt(s, IPPROTO_SCTP, SCTP_REMOTE_UDP_ENCAPS_PORT, &enc, sizeof enc) < 0) {
        perror("SCTP_REMOTE_UDP_ENCAPS_PORT");
        exit(1);
    }
}

static struct sockaddr_in loopback(uint16_t port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static void report(const char *role, uint64_t bytes, uint64_t msgs, double first, double last, double max_gap) {
    double secs = last > first ? last - first : 0;
    printf("{\"role\":\"%s\",\"bytes\":%llu,\"messages\":%llu,\"seconds\":%.6f,\"goodput_mbps\":%.3f,\"max_gap_ms\":%.3f}\n",
           role, (unsigned long long)bytes, (unsigned long long)msgs, secs,
           secs > 0 ? bytes * 8 / secs / 1e6 : 0.0, max_gap * 1e3);
    fflush(stdout);
}

static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* `thinstream send`'s one-way messages: data ("TSO1", id and send time
 * after a version and a count byte) and the end-of-run exchange ("TSOC"). */
#define PPID_THINSTREAM_DATA 0x54534f31u
#define PPID_THINSTREAM_CONTROL 0x54534f43u

static int thin(int argc, char **argv) {
    int sink = strcmp(argv[1], "thinsink") == 0;
    if (argc < (sink ? 7 : 8)) {
        fprintf(stderr, "usage: see the header of peer.c\n");
        return 2;
    }
    uint16_t lenc = (uint16_t)atoi(argv[2]), renc = (uint16_t)atoi(argv[3]), port = (uint16_t)atoi(argv[4]);
    int tuned = argc > (sink ? 7 : 8) && strcmp(argv[sink ? 7 : 8], "tuned") == 0;
    usrsctp_init(lenc, NULL, NULL);
    usrsctp_sysctl_set_sctp_blackhole(2);
    usrsctp_sysctl_set_sctp_no_csum_on_loopback(0);
    if (tuned && sink) {
        usrsctp_sysctl_set_sctp_sack_freq_default(1);
        usrsctp_sysctl_set_sctp_delayed_sack_time_default(0);
    }
    if (tuned && !sink) usrsctp_sysctl_set_sctp_rto_min_default(200);
    struct socket *s = usrsctp_socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP, NULL, NULL, 0, NULL);
    if (!s) { perror("usrsctp_socket"); return 1; }
    set_encaps(s, renc);
    struct sockaddr_in a = loopback(port);
    uint64_t msgs = 0;
    if (sink) {
        double limit = atof(argv[5]);
        FILE *out = fopen(argv[6], "w");
        if (!out) { perror(argv[6]); return 1; }
        setvbuf(out, NULL, _IOLBF, 0); /* every line on disk at once: the bench may stop the sink */
        if (usrsctp_bind(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("bind"); return 1; }
        if (usrsctp_listen(s, 1) < 0) { perror("listen"); return 1; }
        struct socket *c = usrsctp_accept(s, NULL, NULL);
        if (!c) { perror("accept"); return 1; }
        /* Each message's PPID (thinstream's one-way header is told by it). */
        usrsctp_setsockopt(c, IPPROTO_SCTP, SCTP_RECVRCVINFO, &(int){1}, sizeof(int));
        static unsigned char buf[1 << 16];
        size_t have = 0;
        double start = now_s();
        while (now_s() - start < limit) {
            struct sctp_rcvinfo info;
            socklen_t ilen = sizeof info;
            unsigned int itype = 0;
            int flags = 0;
            struct sockaddr_in from;
            socklen_t flen = sizeof from;
            ssize_t n = usrsctp_recvv(c, buf + have, sizeof buf - have, (struct sockaddr *)&from, &flen, &info, &ilen, &itype, &flags);
            if (n <= 0) break;
            have += (size_t)n;
            if (!(flags & MSG_EOR)) { if (have >= sizeof buf) have = 0; continue; }
            uint64_t t = now_ns();
            uint32_t ppid = itype == SCTP_RECVV_RCVINFO ? ntohl(info.rcv_ppid) : 0;
            size_t at = ppid == PPID_THINSTREAM_DATA ? 2 : 0;
            if (ppid != PPID_THINSTREAM_CONTROL && have >= at + 16) {
                uint64_t sent = get_u64(buf + at + 8);
                fprintf(out, "%.3f\n", t > sent ? (t - sent) / 1e6 : 0.0);
                msgs++;
            }
            have = 0;
        }
        fclose(out);
        printf("{\"role\":\"usrsctp-thinsink\",\"messages\":%llu,\"tuned\":%d}\n", (unsigned long long)msgs, tuned);
        usrsctp_close(c);
    } else {
        long count = atol(argv[5]);
        double interval = atof(argv[6]) / 1e3;
        size_t size = (size_t)atoi(argv[7]);
        if (size < 16) size = 16;
        int one = 1;
        usrsctp_setsockopt(s, IPPROTO_SCTP, SCTP_NODELAY, &one, sizeof one);
        if (usrsctp_connect(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect"); return 1; }
        unsigned char *msg = calloc(1, size);
        struct sctp_sndinfo snd;
        memset(&snd, 0, sizeof snd);
        double t0 = now_s();
        for (long i = 0; i < count; i++) {
            double at = t0 + i * interval, now = now_s();
            if (at > now) {
                struct timespec d = {(time_t)(at - now), (long)((at - now - (time_t)(at - now)) * 1e9)};
                nanosleep(&d, NULL);
            }
            put_u64(msg, (uint64_t)i);
            put_u64(msg + 8, now_ns());
            for (int tries = 0; tries < 1000; tries++) {
                ssize_t n = usrsctp_sendv(s, msg, size, NULL, 0, &snd, sizeof snd, SCTP_SENDV_SNDINFO, 0);
                if (n >= 0) { msgs++; break; }
                if (errno != EAGAIN && errno != EINTR) { perror("sendv"); i = count; break; }
                struct timespec d = {0, 1000000};
                nanosleep(&d, NULL);
            }
        }
        /* Let the last messages be delivered before the graceful close. */
        struct timespec d = {5, 0};
        nanosleep(&d, NULL);
        printf("{\"role\":\"usrsctp-thinsource\",\"messages\":%llu,\"tuned\":%d}\n", (unsigned long long)msgs, tuned);
    }
    fflush(stdout);
    usrsctp_close(s);
    for (int i = 0; i < 100 && usrsctp_finish() != 0; i++) {
        struct timespec d = {0, 100000000};
        nanosleep(&d, NULL);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && (strcmp(argv[1], "thinsink") == 0 || strcmp(argv[1], "thinsource") == 0))
        return thin(argc, argv);
    if (argc < 6) {
        fprintf(stderr, "usage: peer sink LOCAL_ENCAPS REMOTE_ENCAPS SCTP_PORT MAX_SECONDS\n"
                        "       peer source LOCAL_ENCAPS REMOTE_ENCAPS SCTP_PORT SIZE SECONDS\n");
        return 2;
    }
    int sink = strcmp(argv[1], "sink") == 0;
    uint16_t lenc = (uint16_t)atoi(argv[2]), renc = (uint16_t)atoi(argv[3]), port = (uint16_t)atoi(argv[4]);
    usrsctp_init(lenc, NULL, NULL);
    usrsctp_sysctl_set_sctp_blackhole(2);
    usrsctp_sysctl_set_sctp_no_csum_on_loopback(0);
    struct socket *s = usrsctp_socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP, NULL, NULL, 0, NULL);
    if (!s) { perror("usrsctp_socket"); return 1; }
    set_encaps(s, renc);
    uint64_t bytes = 0, msgs = 0;
    double first = 0, last = 0, max_gap = 0;
    if (sink) {
        double limit = atof(argv[5]);
        struct sockaddr_in a = loopback(port);
        if (usrsctp_bind(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("bind"); return 1; }
        if (usrsctp_listen(s, 1) < 0) { perror("listen"); return 1; }
        struct socket *c = usrsctp_accept(s, NULL, NULL);
        if (!c) { perror("accept"); return 1; }
        /* Each message's PPID (thinstream's one-way header is told by it). */
        usrsctp_setsockopt(c, IPPROTO_SCTP, SCTP_RECVRCVINFO, &(int){1}, sizeof(int));
        static char buf[1 << 16];
        double start = now_s();
        for (;;) {
            struct sctp_rcvinfo info;
            socklen_t ilen = sizeof info;
            unsigned int itype = 0;
            int flags = 0;
            struct sockaddr_in from;
            socklen_t flen = sizeof from;
            ssize_t n = usrsctp_recvv(c, buf, sizeof buf, (struct sockaddr *)&from, &flen, &info, &ilen, &itype, &flags);
            if (n <= 0) break;
            double t = now_s();
            if (msgs == 0) first = t; else if (t - last > max_gap) max_gap = t - last;
            last = t;
            bytes += (uint64_t)n;
            if (flags & MSG_EOR) msgs++;
            if (t - start > limit) break;
        }
        report("usrsctp-sink", bytes, msgs, first, last, max_gap);
        usrsctp_close(c);
    } else {
        if (argc < 7) { fprintf(stderr, "source needs SIZE SECONDS\n"); return 2; }
        size_t size = (size_t)atoi(argv[5]);
        double secs = atof(argv[6]);
        struct sockaddr_in a = loopback(port);
        if (usrsctp_connect(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect"); return 1; }
        char *msg = calloc(1, size);
        struct sctp_sndinfo snd;
        memset(&snd, 0, sizeof snd);
        first = last = now_s();
        while (last - first < secs) {
            ssize_t n = usrsctp_sendv(s, msg, size, NULL, 0, &snd, sizeof snd, SCTP_SENDV_SNDINFO, 0);
            if (n < 0) { if (errno == EAGAIN || errno == EINTR) continue; perror("sendv"); break; }
            double t = now_s();
            if (t - last > max_gap) max_gap = t - last;
            last = t;
            bytes += (uint64_t)n;
            msgs++;
        }
        report("usrsctp-source", bytes, msgs, first, last, max_gap);
    }
    usrsctp_close(s);
    while (usrsctp_finish() != 0) {
        struct timespec d = {0, 100000000};
        nanosleep(&d, NULL);
    }
    return 0;
}
