//! The `/metrics` page: every poller's counters and the process series in
//! the Prometheus text exposition format, version 0.0.4. Each family has its
//! `# HELP` and `# TYPE` lines once, then its samples.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::observe::cluster_metrics::{
    Carried, ClusterMetrics, Dropped, Refusal, LATENCY_BOUNDS_US,
};
use crate::observe::metrics::{
    PollerMetrics, TimeoutKind, UpstreamResult, GOAWAY_REASONS, STATUSES, WEBSOCKET_CLOSE_CODES,
};
use crate::observe::process_stats::ProcessStats;
use crate::state::metrics::{PlacementMetrics, StateMetrics, COMMIT_BOUNDS_US, OUTCOMES};

/// The `Content-Type` of the page.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Which series a server's page has beside those every server has.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    /// The envelopes each poller sent through uppercut's scheduler.
    pub(crate) envelopes: bool,
    /// TLS handshakes done and failed.
    pub(crate) tls: bool,
    /// WebSocket connections and messages.
    pub(crate) websocket: bool,
    /// The upstream pool's connections and requests (`--upstream`).
    pub(crate) upstream: bool,
    /// HTTP/2 connections, streams and how they ended (`--http2 on`).
    pub(crate) http2: bool,
    /// HTTP/3 connections, streams and Retry packets (`--http3 on`).
    pub(crate) http3: bool,
    /// What each route slot is called (`Routes::route_names`).
    pub(crate) routes: Vec<String>,
    /// The cluster's (`--nats`).
    pub(crate) cluster: Option<Arc<ClusterMetrics>>,
    /// The state store's (`--state`).
    pub(crate) state: Option<Arc<StateMetrics>>,
    /// Placed actors' (`Routes::spawn_placed`).
    pub(crate) placement: Option<Arc<PlacementMetrics>>,
}

/// Renders the page for `pollers` (in poller order) and `process`, with the
/// `series` this server has.
pub(crate) fn render(
    pollers: &[Arc<PollerMetrics>],
    series: &Series,
    process: &ProcessStats,
) -> String {
    let mut page = Page {
        text: String::with_capacity(4096),
        name: "",
    };
    let per_poller = |page: &mut Page, read: &dyn Fn(&PollerMetrics) -> u64| {
        for (index, poller) in pollers.iter().enumerate() {
            page.sample(&format!("poller=\"{index}\""), read(poller));
        }
    };
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);

    page.family(
        "uppercut_connections_open",
        "gauge",
        "Connections open now.",
    );
    per_poller(&mut page, &|p| p.open());
    page.family(
        "uppercut_connections_accepted_total",
        "counter",
        "Connections accepted and admitted.",
    );
    per_poller(&mut page, &|p| load(&p.accepted));
    page.family(
        "uppercut_connections_refused_total",
        "counter",
        "Connections closed at once because the most connections allowed were open.",
    );
    per_poller(&mut page, &|p| load(&p.refused));

    page.family(
        "uppercut_requests_total",
        "counter",
        "Responses sent, by status code.",
    );
    for (index, poller) in pollers.iter().enumerate() {
        let counts = poller.responses();
        let codes = STATUSES.map(Some).chain([None]);
        for (code, count) in codes.zip(counts) {
            // 200 always, so every poller has a series to take a rate of;
            // any other status once sent.
            if count == 0 && code != Some(200) {
                continue;
            }
            let labels = match code {
                Some(code) => format!("poller=\"{index}\",code=\"{code}\""),
                None => format!("poller=\"{index}\",code=\"other\""),
            };
            page.sample(&labels, count);
        }
    }

    page.family(
        "uppercut_request_duration_seconds",
        "histogram",
        "Time from a request's whole head to its response written, by route as declared \
         (static: the static files; none: no route, such as a 404 or a malformed request).",
    );
    for (index, poller) in pollers.iter().enumerate() {
        for (slot, (buckets, sum_us)) in poller.latencies().enumerate() {
            let total = buckets[LATENCY_BOUNDS_US.len()];
            // Only the routes that answered here: a series appears once
            // its route is used, as a status does.
            if total == 0 {
                continue;
            }
            let route = series.routes.get(slot).map_or("?", String::as_str);
            let labels = format!("poller=\"{index}\",route=\"{}\"", label_value(route));
            page.histogram(&labels, &buckets, sum_us);
        }
    }

    page.family(
        "uppercut_bytes_received_total",
        "counter",
        "Bytes read from client connections.",
    );
    per_poller(&mut page, &|p| load(&p.bytes_received));
    page.family(
        "uppercut_bytes_sent_total",
        "counter",
        "Bytes written to client connections.",
    );
    per_poller(&mut page, &|p| load(&p.bytes_sent));

    page.family(
        "uppercut_timeouts_total",
        "counter",
        "Connections closed by a timeout: header (the request took too long, 408), idle (keep-alive) or write (the client read nothing).",
    );
    for (index, poller) in pollers.iter().enumerate() {
        for kind in TimeoutKind::ALL {
            let labels = format!("poller=\"{index}\",kind=\"{}\"", kind.label());
            page.sample(&labels, poller.timeouts(kind));
        }
    }
    page.family(
        "uppercut_accept_pauses_total",
        "counter",
        "Times accepting paused because the process was out of descriptors or memory.",
    );
    per_poller(&mut page, &|p| load(&p.accept_pauses));

    if series.tls {
        page.family(
            "uppercut_tls_handshakes_total",
            "counter",
            "TLS handshakes completed.",
        );
        per_poller(&mut page, &|p| load(&p.tls_handshakes));
        page.family(
            "uppercut_tls_handshake_failures_total",
            "counter",
            "TLS handshakes that failed: bad records, alerts, stalls, clients not speaking TLS.",
        );
        per_poller(&mut page, &|p| load(&p.tls_handshake_failures));
    }
    if series.http2 {
        page.family(
            "uppercut_http2_connections_total",
            "counter",
            "Connections that spoke HTTP/2 (ALPN h2, or the h2c preface).",
        );
        per_poller(&mut page, &|p| load(&p.http2_connections));
        page.family(
            "uppercut_http2_streams_total",
            "counter",
            "HTTP/2 streams begun (requests).",
        );
        per_poller(&mut page, &|p| load(&p.http2_streams));
        page.family(
            "uppercut_http2_resets_total",
            "counter",
            "HTTP/2 streams the client reset before they were answered.",
        );
        per_poller(&mut page, &|p| load(&p.http2_resets));
        page.family(
            "uppercut_http2_goaways_total",
            "counter",
            "HTTP/2 connections ended by a GOAWAY, by its error code.",
        );
        for (index, poller) in pollers.iter().enumerate() {
            let counts = poller.http2_goaways();
            let reasons = GOAWAY_REASONS.iter().map(|&(_, label)| label);
            for (label, count) in reasons.chain(["other"]).zip(counts) {
                page.sample(&format!("poller=\"{index}\",reason=\"{label}\""), count);
            }
        }
    }
    if series.http3 {
        page.family(
            "uppercut_http3_connections_total",
            "counter",
            "QUIC connections accepted for HTTP/3.",
        );
        per_poller(&mut page, &|p| load(&p.http3_connections));
        page.family(
            "uppercut_http3_streams_total",
            "counter",
            "HTTP/3 request streams begun (requests).",
        );
        per_poller(&mut page, &|p| load(&p.http3_streams));
        page.family(
            "uppercut_http3_resets_total",
            "counter",
            "HTTP/3 request streams the client reset before they were answered.",
        );
        per_poller(&mut page, &|p| load(&p.http3_resets));
        page.family(
            "uppercut_quic_retries_total",
            "counter",
            "Retry packets sent to validate a client's address before its handshake.",
        );
        per_poller(&mut page, &|p| load(&p.quic_retries));
    }
    if series.http2 || series.http3 {
        page.family(
            "uppercut_protocol_streams_total",
            "counter",
            "Requests begun on HTTP/2 and HTTP/3 streams, by protocol.",
        );
        for (index, poller) in pollers.iter().enumerate() {
            let protocols = [
                (series.http2, "h2", load(&poller.http2_streams)),
                (series.http3, "h3", load(&poller.http3_streams)),
            ];
            for (_, protocol, count) in protocols.iter().filter(|(on, _, _)| *on) {
                page.sample(
                    &format!("poller=\"{index}\",protocol=\"{protocol}\""),
                    *count,
                );
            }
        }
    }
    if series.websocket {
        page.family(
            "uppercut_websocket_upgrades_total",
            "counter",
            "Connections upgraded to WebSockets.",
        );
        per_poller(&mut page, &|p| load(&p.websocket_upgrades));
        page.family(
            "uppercut_websocket_open",
            "gauge",
            "WebSocket connections open now.",
        );
        per_poller(&mut page, &|p| p.websockets_open());
        page.family(
            "uppercut_websocket_closes_total",
            "counter",
            "WebSocket connections ended, by close code (1005: a close without one; none: cut without a close handshake).",
        );
        for (index, poller) in pollers.iter().enumerate() {
            for (slot, count) in poller.websocket_closes().into_iter().enumerate() {
                let code = match WEBSOCKET_CLOSE_CODES.get(slot) {
                    Some(code) => code.to_string(),
                    None if slot == WEBSOCKET_CLOSE_CODES.len() => "other".to_string(),
                    None => "none".to_string(),
                };
                page.sample(&format!("poller=\"{index}\",code=\"{code}\""), count);
            }
        }
        page.family(
            "uppercut_websocket_messages_received_total",
            "counter",
            "Complete WebSocket messages from clients.",
        );
        per_poller(&mut page, &|p| load(&p.websocket_messages_received));
        page.family(
            "uppercut_websocket_messages_sent_total",
            "counter",
            "WebSocket messages written to clients.",
        );
        per_poller(&mut page, &|p| load(&p.websocket_messages_sent));
        page.family(
            "uppercut_websocket_deflate_sent_bytes_total",
            "counter",
            "Payload bytes of WebSocket messages sent compressed (permessage-deflate), before (plain) and after (deflated) compression.",
        );
        for (index, poller) in pollers.iter().enumerate() {
            let plain = load(&poller.websocket_deflate_sent_plain);
            let wire = load(&poller.websocket_deflate_sent_wire);
            page.sample(&format!("poller=\"{index}\",form=\"plain\""), plain);
            page.sample(&format!("poller=\"{index}\",form=\"deflated\""), wire);
        }
        page.family(
            "uppercut_websocket_deflate_received_bytes_total",
            "counter",
            "Payload bytes of compressed WebSocket messages received, as they came (deflated) and inflated (plain).",
        );
        for (index, poller) in pollers.iter().enumerate() {
            let wire = load(&poller.websocket_deflate_received_wire);
            let plain = load(&poller.websocket_deflate_received_plain);
            page.sample(&format!("poller=\"{index}\",form=\"deflated\""), wire);
            page.sample(&format!("poller=\"{index}\",form=\"plain\""), plain);
        }
    }

    if series.upstream {
        page.family(
            "uppercut_upstream_connections",
            "gauge",
            "Connections to the upstream service of /io, idle or busy with a request.",
        );
        for (index, poller) in pollers.iter().enumerate() {
            for (state, counter) in [
                ("idle", &poller.upstream_idle),
                ("busy", &poller.upstream_busy),
            ] {
                page.sample(
                    &format!("poller=\"{index}\",state=\"{state}\""),
                    load(counter),
                );
            }
        }
        page.family(
            "uppercut_upstream_requests_total",
            "counter",
            "Requests to the upstream service of /io, by how they ended.",
        );
        for (index, poller) in pollers.iter().enumerate() {
            for result in UpstreamResult::ALL {
                let labels = format!("poller=\"{index}\",result=\"{}\"", result.label());
                page.sample(&labels, poller.upstream_results(result));
            }
        }
    }

    if let Some(cluster) = &series.cluster {
        render_cluster(&mut page, cluster);
    }
    if let Some(state) = &series.state {
        render_state(&mut page, state);
    }
    if let Some(placement) = &series.placement {
        render_placement(&mut page, placement);
    }

    if series.envelopes {
        page.family(
            "uppercut_scheduler_envelopes_total",
            "counter",
            "Envelopes sent through the uppercut scheduler: wakes, ticks and mail to pollers.",
        );
        per_poller(&mut page, &|p| load(&p.envelopes));
    }

    page.process(process);
    page.text
}

/// The cluster's series (`--nats`).
fn render_cluster(page: &mut Page, cluster: &ClusterMetrics) {
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    page.family(
        "uppercut_nats_connected",
        "gauge",
        "1 when every poller is connected to NATS and subscribed, else 0.",
    );
    page.plain(u64::from(cluster.is_connected()));
    page.family(
        "uppercut_nats_links_up",
        "gauge",
        "Pollers connected to NATS and subscribed.",
    );
    page.plain(load(&cluster.links_up));
    page.family(
        "uppercut_nats_node_name_taken",
        "gauge",
        "1 when another server holds this node's name and this one left the cluster, else 0.",
    );
    page.plain(load(&cluster.name_taken));
    page.family(
        "uppercut_nats_reconnects_total",
        "counter",
        "Connections to NATS made again after one was lost.",
    );
    page.plain(load(&cluster.reconnects));
    page.family(
        "uppercut_nats_backpressure_total",
        "counter",
        "Sends to other servers taken past --nats-buffer, each of whose senders then waited \
         (a connection stopped reading, an actor paused, a thread blocked) until it drained.",
    );
    page.plain(load(&cluster.pressed));
    page.family(
        "uppercut_nats_waiting_bytes",
        "gauge",
        "Bytes waiting to go to NATS now, over every poller (past --nats-buffer per poller, \
         senders wait).",
    );
    page.plain(load(&cluster.waiting_bytes));
    page.family(
        "uppercut_nats_paused_senders",
        "gauge",
        "Senders waiting now for a poller's NATS link to drain: connections not reading, \
         actors paused, threads blocked.",
    );
    page.plain(load(&cluster.paused_senders));
    for (name, help, read) in [
        (
            "uppercut_nats_messages_total",
            "Messages to and from other servers, by kind and direction.",
            ClusterMetrics::messages as fn(&ClusterMetrics, Carried) -> (u64, u64),
        ),
        (
            "uppercut_nats_bytes_total",
            "Bytes of messages to and from other servers (headers and payload), by kind and direction.",
            ClusterMetrics::bytes,
        ),
    ] {
        page.family(name, "counter", help);
        for kind in Carried::ALL {
            let (received, sent) = read(cluster, kind);
            let label = kind.label();
            page.sample(&format!("kind=\"{label}\",direction=\"in\""), received);
            page.sample(&format!("kind=\"{label}\",direction=\"out\""), sent);
        }
    }
    page.family(
        "uppercut_nats_refused_total",
        "counter",
        "Sends to other servers refused at the call, by reason.",
    );
    for why in Refusal::ALL {
        page.sample(
            &format!("reason=\"{}\"", why.label()),
            cluster.refusals(why),
        );
    }
    page.family(
        "uppercut_nats_dropped_total",
        "counter",
        "Messages from NATS dropped, by reason.",
    );
    for why in Dropped::ALL {
        page.sample(&format!("reason=\"{}\"", why.label()), cluster.drops(why));
    }
    page.family(
        "uppercut_nats_call_seconds",
        "histogram",
        "Time from a request to another server's actor to its answer.",
    );
    let (buckets, sum_us) = cluster.latency();
    page.histogram("", &buckets, sum_us);
}

/// The state store's series (`--state`).
fn render_state(page: &mut Page, state: &StateMetrics) {
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    page.family(
        "uppercut_state_writes_total",
        "counter",
        "Durable actors' writes of their state, by outcome.",
    );
    for outcome in OUTCOMES.iter().filter(|&&o| o != "missing") {
        page.sample(&format!("result=\"{outcome}\""), state.writes(outcome));
    }
    page.family(
        "uppercut_state_loads_total",
        "counter",
        "Durable actors' reads of their state, by outcome (missing: never written, the initial state).",
    );
    for outcome in OUTCOMES {
        page.sample(&format!("result=\"{outcome}\""), state.loads(outcome));
    }
    page.family(
        "uppercut_state_commit_seconds",
        "histogram",
        "Time the store took to commit, each commit one or more actors' writes.",
    );
    let (buckets, sum_us) = state.commit_latency();
    page.histogram_of("", &COMMIT_BOUNDS_US, &buckets, sum_us);
    page.family(
        "uppercut_state_held_answers",
        "gauge",
        "Answers waiting now for the change they depend on to be durable.",
    );
    page.plain(load(&state.held));
    page.family(
        "uppercut_state_refused_total",
        "counter",
        "Answers refused (503) because a state could not be saved or read.",
    );
    page.plain(load(&state.refused));
}

/// Placed actors' series.
fn render_placement(page: &mut Page, placement: &PlacementMetrics) {
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    page.family(
        "uppercut_actor_active",
        "gauge",
        "Placed actors' names active on this server now, by kind.",
    );
    let active = placement
        .active
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for (kind, count) in active {
        page.sample(&format!("actor=\"{}\"", label_value(&kind)), count);
    }
    for (name, help, counter) in [
        (
            "uppercut_placement_activations_total",
            "Placed names activated on this server.",
            &placement.activations,
        ),
        (
            "uppercut_placement_failovers_total",
            "Placed names taken over here after their holder's lease ran out.",
            &placement.failovers,
        ),
        (
            "uppercut_placement_handovers_total",
            "Leases given up here (a drain, an idle name), for the next server to take at once.",
            &placement.released,
        ),
        (
            "uppercut_placement_leases_lost_total",
            "Leases lost here: a renewal refused, or none answered in time; the name stopped here.",
            &placement.lost,
        ),
        (
            "uppercut_placement_forwarded_total",
            "Messages forwarded to the server that holds their placed name.",
            &placement.forwarded,
        ),
    ] {
        page.family(name, "counter", help);
        page.plain(load(counter));
    }
}

/// A label's value as the text format writes it: `\`, `"` and a newline
/// escaped.
fn label_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

struct Page {
    text: String,
    /// The family being written.
    name: &'static str,
}

impl Page {
    fn family(&mut self, name: &'static str, kind: &str, help: &str) {
        let _ = write!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}\n");
        self.name = name;
    }

    /// A sample of a family without labels.
    fn plain(&mut self, value: u64) {
        let _ = writeln!(self.text, "{} {value}", self.name);
    }

    fn sample(&mut self, labels: &str, value: u64) {
        let _ = writeln!(self.text, "{}{{{labels}}} {value}", self.name);
    }

    /// A histogram's samples, with `labels` (may be empty) beside `le`:
    /// cumulative `buckets` over `LATENCY_BOUNDS_US`, the last holding
    /// every observation, and their sum in microseconds.
    fn histogram(
        &mut self,
        labels: &str,
        buckets: &[u64; LATENCY_BOUNDS_US.len() + 1],
        sum_us: u64,
    ) {
        self.histogram_of(labels, &LATENCY_BOUNDS_US, buckets, sum_us);
    }

    /// A histogram with `bounds` (µs) and `buckets`, one more than the
    /// bounds: cumulative, the last `+Inf`.
    fn histogram_of(&mut self, labels: &str, bounds: &[u64], buckets: &[u64], sum_us: u64) {
        let name = self.name;
        let sep = if labels.is_empty() { "" } else { "," };
        for (bound, count) in bounds.iter().zip(buckets) {
            let le = *bound as f64 / 1e6;
            let _ = writeln!(
                self.text,
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {count}"
            );
        }
        let total = buckets[bounds.len()];
        let _ = writeln!(
            self.text,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {total}"
        );
        let braced = match labels.is_empty() {
            true => String::new(),
            false => format!("{{{labels}}}"),
        };
        let _ = writeln!(self.text, "{name}_sum{braced} {}", sum_us as f64 / 1e6);
        let _ = writeln!(self.text, "{name}_count{braced} {total}");
    }

    fn process(&mut self, process: &ProcessStats) {
        let series: [(&'static str, &str, &str, Option<f64>); 5] = [
            (
                "process_cpu_seconds_total",
                "counter",
                "User and system CPU time spent, in seconds.",
                process.cpu_seconds,
            ),
            (
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size in bytes.",
                process.resident_bytes.map(|v| v as f64),
            ),
            (
                "process_open_fds",
                "gauge",
                "Open file descriptors.",
                process.open_fds.map(|v| v as f64),
            ),
            (
                "process_max_fds",
                "gauge",
                "Limit on open file descriptors.",
                process.max_fds.map(|v| v as f64),
            ),
            (
                "process_start_time_seconds",
                "gauge",
                "Start time of the process since the Unix epoch, in seconds.",
                process.start_time_seconds,
            ),
        ];
        // A value the system does not give has no family at all.
        for (name, kind, help, value) in series {
            if let Some(value) = value {
                self.family(name, kind, help);
                let _ = writeln!(self.text, "{name} {value}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A histogram as Prometheus reads it: each bound in seconds as `le`,
    /// the cumulative counts beside them, `+Inf` and `_count` the last,
    /// the sum in seconds.
    #[test]
    fn a_histogram_is_written_with_its_bounds_in_seconds() {
        let mut page = Page {
            text: String::new(),
            name: "t",
        };
        page.histogram_of(
            "a=\"1\"",
            &[100, 2_500, 1_000_000],
            &[1, 2, 4, 7],
            3_000_250,
        );
        assert_eq!(
            page.text,
            "t_bucket{a=\"1\",le=\"0.0001\"} 1\n\
             t_bucket{a=\"1\",le=\"0.0025\"} 2\n\
             t_bucket{a=\"1\",le=\"1\"} 4\n\
             t_bucket{a=\"1\",le=\"+Inf\"} 7\n\
             t_sum{a=\"1\"} 3.00025\n\
             t_count{a=\"1\"} 7\n"
        );
        let mut page = Page {
            text: String::new(),
            name: "t",
        };
        page.histogram_of("", &[250], &[0, 3], 0);
        assert_eq!(
            page.text,
            "t_bucket{le=\"0.00025\"} 0\nt_bucket{le=\"+Inf\"} 3\nt_sum 0\nt_count 3\n"
        );
    }
}
