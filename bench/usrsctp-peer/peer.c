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
 * Both print: bytes, messages, seconds (first to last message), the
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

int main(int argc, char **argv) {
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
