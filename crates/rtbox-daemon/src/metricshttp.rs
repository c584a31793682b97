//! `--metrics-listen ADDR`: the metrics over HTTP at `/metrics`, where Prometheus scrapes
//! (text exposition format 0.0.4), beside the socket's `metrics` request.
//!
//! The HTTP side is `tiny_http` (a small, synchronous, dependency-light server: one thread,
//! no async runtime); the text itself comes from the enforcement loop, which owns every
//! figure, through the same queue the socket's requests take.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// The Prometheus text format's content type.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Longest wait for the loop's answer before the scrape gets 503.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// Why `--metrics-listen` cannot be served; the daemon does not start.
#[derive(Debug)]
pub enum ListenError {
    /// Not `PORT`, `HOST:PORT` or `[V6]:PORT`.
    BadAddr {
        text: String,
        why: String,
    },
    Bind {
        addr: SocketAddr,
        why: String,
    },
}

impl std::fmt::Display for ListenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenError::BadAddr { text, why } => write!(
                f,
                "--metrics-listen \"{text}\": {why} (give PORT for loopback, or HOST:PORT)"
            ),
            ListenError::Bind { addr, why } => write!(f, "--metrics-listen {addr}: {why}"),
        }
    }
}

impl std::error::Error for ListenError {}

/// The address to listen on: a bare port is loopback only (metrics name processes and
/// containers: exposing them beyond the host is the operator's explicit choice).
pub fn listen_addr(text: &str) -> Result<SocketAddr, ListenError> {
    let bad = |why: String| ListenError::BadAddr {
        text: text.to_string(),
        why,
    };
    let t = text.trim();
    if let Ok(port) = t.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    let t = t
        .strip_prefix(':')
        .map_or(t.to_string(), |p| format!("127.0.0.1:{p}"));
    t.to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .next()
        .ok_or_else(|| bad("names no address".into()))
}

/// A bound metrics server.
pub struct MetricsServer {
    server: tiny_http::Server,
}

impl MetricsServer {
    pub fn bind(addr: SocketAddr) -> Result<MetricsServer, ListenError> {
        tiny_http::Server::http(addr)
            .map(|server| MetricsServer { server })
            .map_err(|e| ListenError::Bind {
                addr,
                why: e.to_string(),
            })
    }

    /// The bound address (the port chosen when 0 was asked).
    pub fn addr(&self) -> Option<SocketAddr> {
        self.server.server_addr().to_ip()
    }

    /// Serves until the process ends: `GET /metrics` gets `text()` (None: the loop did not
    /// answer in time, 503), any other path 404, any other method 405.
    pub fn serve(self, text: impl Fn(Duration) -> Option<String>) {
        for req in self.server.incoming_requests() {
            let (code, body) = answer(req.method(), req.url(), || text(ANSWER_TIMEOUT));
            let header = tiny_http::Header::from_bytes(&b"Content-Type"[..], CONTENT_TYPE)
                .expect("static header");
            let resp = tiny_http::Response::from_string(body)
                .with_status_code(code)
                .with_header(header);
            if let Err(e) = req.respond(resp) {
                tracing::debug!(error = %e, "metrics: answer not sent");
            }
        }
    }
}

/// Status code and body of one request.
fn answer(
    method: &tiny_http::Method,
    url: &str,
    text: impl FnOnce() -> Option<String>,
) -> (u16, String) {
    let path = url.split('?').next().unwrap_or("");
    match (method, path) {
        (tiny_http::Method::Get | tiny_http::Method::Head, "/metrics") => match text() {
            Some(t) => (200, t),
            None => (503, "the enforcement loop did not answer\n".into()),
        },
        (_, "/metrics") => (405, "only GET\n".into()),
        _ => (404, "rtbox serves /metrics\n".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_is_loopback_and_bad_addresses_are_named() {
        assert_eq!(listen_addr("9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(listen_addr(":9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(listen_addr("0.0.0.0:80").unwrap().to_string(), "0.0.0.0:80");
        assert_eq!(listen_addr("[::1]:9464").unwrap().to_string(), "[::1]:9464");
        let e = listen_addr("localhost:notaport").unwrap_err().to_string();
        assert!(
            e.starts_with("--metrics-listen \"localhost:notaport\": "),
            "{e}"
        );
    }

    #[test]
    fn only_get_metrics_is_served() {
        use tiny_http::Method;
        assert_eq!(
            answer(&Method::Get, "/metrics?x=1", || Some("a 1\n".into())),
            (200, "a 1\n".into())
        );
        assert_eq!(answer(&Method::Get, "/metrics", || None).0, 503);
        assert_eq!(answer(&Method::Post, "/metrics", || None).0, 405);
        assert_eq!(answer(&Method::Get, "/", || None).0, 404);
    }

    #[test]
    fn a_scrape_over_tcp_gets_the_text() {
        use std::io::{Read, Write};
        let s = MetricsServer::bind(listen_addr("0").unwrap()).unwrap();
        let addr = s.addr().unwrap();
        std::thread::spawn(move || s.serve(|_| Some("rtbox_up 1\n".into())));
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.0 200"), "{out}");
        assert!(out.contains("text/plain; version=0.0.4"), "{out}");
        assert!(out.ends_with("rtbox_up 1\n"), "{out}");
    }
}
