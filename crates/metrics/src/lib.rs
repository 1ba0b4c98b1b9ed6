//! Metrics from trace records: latencies, retransmission statistics, overhead, throughput, fairness.
