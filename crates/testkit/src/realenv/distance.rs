//! A TCP relay that holds every chunk of bytes for half a round trip in
//! each direction, so that a client connecting through it sees the real API
//! server as one a network away (docs/design.md#the-corpus-setups-applied):
//! TLS passes through untouched, and chunks in flight overlap as on a real
//! link (the delay is latency, not a bandwidth limit).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The relay, until dropped.
pub struct Distance {
    /// `https://127.0.0.1:PORT`: the API server through the relay.
    pub server: String,
    stop: Arc<AtomicBool>,
}

impl Distance {
    /// A relay to `server` (`https://HOST:PORT`) with round trip `rtt`.
    pub fn start(server: &str, rtt: Duration) -> Distance {
        let target = server
            .strip_prefix("https://")
            .expect("an https:// server")
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let port = listener.local_addr().expect("the relay's address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let one_way = rtt / 2;
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let _ = client.set_nonblocking(false);
                        let Ok(upstream) = TcpStream::connect(&target) else {
                            continue;
                        };
                        relay(client, upstream, one_way, stopped.clone());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Distance {
            server: format!("https://127.0.0.1:{port}"),
            stop,
        }
    }
}

impl Drop for Distance {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Both directions of one connection.
fn relay(client: TcpStream, upstream: TcpStream, one_way: Duration, stop: Arc<AtomicBool>) {
    let pairs = [
        (client.try_clone(), upstream.try_clone()),
        (upstream.try_clone(), client.try_clone()),
    ];
    for (from, to) in pairs {
        if let (Ok(from), Ok(to)) = (from, to) {
            direction(from, to, one_way, stop.clone());
        }
    }
}

/// One direction: a reader stamps each chunk with when it may leave, a
/// writer sends it then; the end of the stream travels the same way.
fn direction(mut from: TcpStream, mut to: TcpStream, one_way: Duration, stop: Arc<AtomicBool>) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = tx.send((Instant::now() + one_way, Vec::new()));
                    return;
                }
                Ok(n) => {
                    if tx
                        .send((Instant::now() + one_way, buf[..n].to_vec()))
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
    std::thread::spawn(move || {
        for (due, chunk) in rx {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if chunk.is_empty() || to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
