// The ns-3 side of bench/sim-vs-ns3: the same scenarios as
// scenarios/bench/sim-vs-ns3-*.toml, built with ns-3's point-to-point links
// and its TCP, so wall time, events and packet hops per second and peak
// memory can be compared with the thinstream simulator.
//
//   thin      one thin TCP stream, 100 B every 250 ms, 50 ms each way, 5 %
//             per-packet loss on each receiving device (RateErrorModel)
//   dumbbell  the thin stream plus 20 greedy flows (BulkSend) over a
//             10 Mbit/s bottleneck with a 100-packet drop-tail queue each
//             way; senders' access links 50 ms each way
//
// TCP: TcpNewReno with classic (RFC 6675) recovery, configured like the
// simulator's `newreno` profile: SACK on, timestamps off, MSS 1448, initial
// window 3 segments, RTO.min 1 s and initial RTO 1 s, delayed ACK every
// second segment or 200 ms, Nagle off, 256 KiB send and receive buffers,
// 5 SYN retries, 15 data retries. No queue discs (the traffic-control layer
// is removed from every device, as the simulator's links are bare drop-tail
// queues), no pcap or ascii tracing.
//
// Prints one JSON object on stdout: events executed (Simulator::GetEventCount),
// packet hops (packets offered to a point-to-point device, counted by a MacTx
// trace sink on every device), messages written and delivered by the thin
// stream, and the greedy flows' aggregate goodput at the sinks.
//
// Build: g++ -O2 -std=c++17 scenarios.cc $(pkg-config --libs ns3-...) (see
// bench/sim-vs-ns3, which builds and runs it).

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-layout-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <cstdio>
#include <string>

using namespace ns3;

namespace
{

const uint16_t THIN_PORT = 5000;
const uint16_t BULK_PORT = 6000;
const uint32_t THIN_BYTES = 100;
const Time THIN_IAT = MilliSeconds(250);

uint64_t g_hops = 0;
uint64_t g_written = 0;
uint64_t g_refused = 0;

void
CountHop(Ptr<const Packet>)
{
    ++g_hops;
}

void
ConfigureTcp()
{
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TcpNewReno::GetTypeId()));
    Config::SetDefault("ns3::TcpL4Protocol::RecoveryType",
                       TypeIdValue(TcpClassicRecovery::GetTypeId()));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(3));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(2));
    Config::SetDefault("ns3::TcpSocket::DelAckTimeout", TimeValue(MilliSeconds(200)));
    Config::SetDefault("ns3::TcpSocket::TcpNoDelay", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(256 * 1024));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(256 * 1024));
    Config::SetDefault("ns3::TcpSocket::ConnTimeout", TimeValue(Seconds(1)));
    Config::SetDefault("ns3::TcpSocket::ConnCount", UintegerValue(5));
    Config::SetDefault("ns3::TcpSocket::DataRetries", UintegerValue(15));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(false));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(Seconds(1)));
    Config::SetDefault("ns3::TcpSocketBase::ClockGranularity", TimeValue(MilliSeconds(1)));
    Config::SetDefault("ns3::RttEstimator::InitialEstimation", TimeValue(Seconds(1)));
}

// The thin writer: one 100-byte message every 250 ms from time zero (the
// connection's handshake runs meanwhile; TCP buffers what is written
// before it is up, as the simulator's workload does).
void
WriteThin(Ptr<Socket> socket, Time stop)
{
    if (Simulator::Now() >= stop)
    {
        return;
    }
    if (socket->Send(Create<Packet>(THIN_BYTES)) == static_cast<int>(THIN_BYTES))
    {
        ++g_written;
    }
    else
    {
        ++g_refused;
    }
    Simulator::Schedule(THIN_IAT, &WriteThin, socket, stop);
}

Ptr<Socket>
StartThin(Ptr<Node> from, Ipv4Address to, Time stop)
{
    Ptr<Socket> socket = Socket::CreateSocket(from, TcpSocketFactory::GetTypeId());
    socket->Bind();
    socket->Connect(InetSocketAddress(to, THIN_PORT));
    Simulator::ScheduleNow(&WriteThin, socket, stop);
    return socket;
}

Ptr<PacketSink>
InstallSink(Ptr<Node> node, uint16_t port)
{
    PacketSinkHelper helper("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
    ApplicationContainer apps = helper.Install(node);
    apps.Start(Seconds(0));
    return DynamicCast<PacketSink>(apps.Get(0));
}

// Removes the queue disc that address assignment installs on every device,
// so each link is the device's own drop-tail queue.
void
RemoveQueueDiscs()
{
    TrafficControlHelper tch;
    for (uint32_t n = 0; n < NodeList::GetNNodes(); ++n)
    {
        Ptr<Node> node = NodeList::GetNode(n);
        for (uint32_t d = 0; d < node->GetNDevices(); ++d)
        {
            Ptr<NetDevice> dev = node->GetDevice(d);
            if (DynamicCast<PointToPointNetDevice>(dev))
            {
                tch.Uninstall(dev);
            }
        }
    }
}

Ptr<RateErrorModel>
Loss(double rate)
{
    Ptr<RateErrorModel> em = CreateObject<RateErrorModel>();
    em->SetAttribute("ErrorUnit", StringValue("ERROR_UNIT_PACKET"));
    em->SetAttribute("ErrorRate", DoubleValue(rate));
    return em;
}

} // namespace

int
main(int argc, char* argv[])
{
    std::string scenario = "thin";
    double duration = 7200;
    uint32_t seed = 1;
    uint32_t bulk = 20;
    CommandLine cmd(__FILE__);
    cmd.AddValue("scenario", "thin or dumbbell", scenario);
    cmd.AddValue("duration", "simulated seconds", duration);
    cmd.AddValue("seed", "run number of the random streams", seed);
    cmd.AddValue("bulk", "greedy flows in the dumbbell", bulk);
    cmd.Parse(argc, argv);
    if (scenario != "thin" && scenario != "dumbbell")
    {
        std::fprintf(stderr, "--scenario must be thin or dumbbell, not %s\n", scenario.c_str());
        return 2;
    }
    if (!(duration > 0))
    {
        std::fprintf(stderr, "--duration must be a positive number of seconds\n");
        return 2;
    }
    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(seed);
    ConfigureTcp();
    Time stop = Seconds(duration);

    Ptr<PacketSink> thinSink;
    std::vector<Ptr<PacketSink>> bulkSinks;
    Ptr<Socket> thinSocket;
    if (scenario == "thin")
    {
        NodeContainer nodes;
        nodes.Create(2);
        PointToPointHelper p2p;
        p2p.SetDeviceAttribute("DataRate", StringValue("1Gbps"));
        p2p.SetChannelAttribute("Delay", StringValue("50ms"));
        NetDeviceContainer devs = p2p.Install(nodes);
        devs.Get(0)->SetAttribute("ReceiveErrorModel", PointerValue(Loss(0.05)));
        devs.Get(1)->SetAttribute("ReceiveErrorModel", PointerValue(Loss(0.05)));
        InternetStackHelper stack;
        stack.Install(nodes);
        Ipv4AddressHelper addr("10.0.0.0", "255.255.255.0");
        Ipv4InterfaceContainer ifs = addr.Assign(devs);
        RemoveQueueDiscs();
        thinSink = InstallSink(nodes.Get(1), THIN_PORT);
        thinSocket = StartThin(nodes.Get(0), ifs.GetAddress(1), stop);
    }
    else
    {
        PointToPointHelper bottleneck;
        bottleneck.SetDeviceAttribute("DataRate", StringValue("10Mbps"));
        bottleneck.SetChannelAttribute("Delay", StringValue("0ms"));
        bottleneck.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("100p"));
        PointToPointHelper left;
        left.SetDeviceAttribute("DataRate", StringValue("1Gbps"));
        left.SetChannelAttribute("Delay", StringValue("50ms"));
        left.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("100000p"));
        PointToPointHelper right;
        right.SetDeviceAttribute("DataRate", StringValue("1Gbps"));
        right.SetChannelAttribute("Delay", StringValue("0ms"));
        right.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("100000p"));
        uint32_t leaves = bulk + 1;
        PointToPointDumbbellHelper d(leaves, left, leaves, right, bottleneck);
        InternetStackHelper stack;
        d.InstallStack(stack);
        d.AssignIpv4Addresses(Ipv4AddressHelper("10.1.0.0", "255.255.255.0"),
                              Ipv4AddressHelper("10.2.0.0", "255.255.255.0"),
                              Ipv4AddressHelper("10.3.0.0", "255.255.255.0"));
        Ipv4GlobalRoutingHelper::PopulateRoutingTables();
        RemoveQueueDiscs();
        // Leaf 0: the thin stream; leaves 1..=bulk: greedy flows.
        thinSink = InstallSink(d.GetRight(0), THIN_PORT);
        thinSocket = StartThin(d.GetLeft(0), d.GetRightIpv4Address(0), stop);
        for (uint32_t i = 1; i < leaves; ++i)
        {
            bulkSinks.push_back(InstallSink(d.GetRight(i), BULK_PORT));
            BulkSendHelper src("ns3::TcpSocketFactory",
                               InetSocketAddress(d.GetRightIpv4Address(i), BULK_PORT));
            src.SetAttribute("MaxBytes", UintegerValue(0));
            src.SetAttribute("SendSize", UintegerValue(1448));
            ApplicationContainer app = src.Install(d.GetLeft(i));
            app.Start(Seconds(0));
        }
    }
    Config::ConnectWithoutContext("/NodeList/*/DeviceList/*/$ns3::PointToPointNetDevice/MacTx",
                                  MakeCallback(&CountHop));

    Simulator::Stop(stop);
    Simulator::Run();
    uint64_t events = Simulator::GetEventCount();
    uint64_t bulkBytes = 0;
    for (const auto& s : bulkSinks)
    {
        bulkBytes += s->GetTotalRx();
    }
    uint64_t thinBytes = thinSink->GetTotalRx();
    std::printf("{\"simulator\": \"ns-3 %s\", \"scenario\": \"%s\", \"simulated_s\": %.3f, "
                "\"events\": %llu, \"packet_hops\": %llu, \"messages_written\": %llu, "
                "\"messages_refused\": %llu, \"messages_delivered\": %llu, "
                "\"bulk_flows\": %zu, \"bulk_goodput_kbps\": %.1f}\n",
                "3.37",
                scenario.c_str(),
                duration,
                static_cast<unsigned long long>(events),
                static_cast<unsigned long long>(g_hops),
                static_cast<unsigned long long>(g_written),
                static_cast<unsigned long long>(g_refused),
                static_cast<unsigned long long>(thinBytes / THIN_BYTES),
                bulkSinks.size(),
                bulkBytes * 8.0 / duration / 1000.0);
    Simulator::Destroy();
    return 0;
}
