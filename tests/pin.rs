//! `--pin`: each poller's worker thread gets a CPU of its own, and the
//! scheduler thread keeps the process's mask; without it nothing is pinned.
//! One test, so that no other server's `worker-*` threads run beside it.

mod common;

use std::fs;
use std::thread;
use std::time::{Duration, Instant};

use common::{assert_response, config, start_with, Client, HELLO};
use uppercut_mio_server::{Config, Dispatch, Routes};

/// The CPUs a `Cpus_allowed_list` names ("0-3,6").
fn cpus(list: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in list.trim().split(',') {
        let (first, last) = part.split_once('-').unwrap_or((part, part));
        cpus.extend(first.parse::<usize>().unwrap()..=last.parse::<usize>().unwrap());
    }
    cpus
}

/// How many pool threads are pinned to a single CPU.
fn pinned_workers(threads: &[Vec<usize>]) -> usize {
    threads.iter().filter(|cpus| cpus.len() == 1).count()
}

/// Each uppercut pool thread's (`worker-N`, the scheduler's included) CPUs.
fn pool_thread_cpus() -> Vec<Vec<usize>> {
    let mut found = Vec::new();
    for task in fs::read_dir("/proc/self/task").unwrap() {
        let Ok(status) = fs::read_to_string(task.unwrap().path().join("status")) else {
            continue; // the thread ended meanwhile
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .map(str::trim)
                .unwrap()
                .to_string()
        };
        if field("Name:").starts_with("worker-") {
            found.push(cpus(&field("Cpus_allowed_list:")));
        }
    }
    found
}

/// Starts two pollers and runs a request on two connections, dealt one to
/// each poller, so both pollers have run. A worker is pinned the first time a
/// poller runs on it, and on a loaded machine both pollers' first rounds can
/// land on the same worker; the other is pinned when a poller next lands on
/// it, which a poller with a connection does within its sweep. So with `pin`
/// this waits, up to a deadline, for two pinned workers. Returns the pool
/// threads' CPUs.
fn pool_threads_of_a_running_server(dispatch: Dispatch, pin: bool) -> Vec<Vec<usize>> {
    let config = Config {
        pin,
        ..config(dispatch)
    };
    let server = start_with(&config, Routes::standard());
    let mut clients: Vec<Client> = (0..2)
        .map(|_| Client::connect(server.local_addr()))
        .collect();
    for client in &mut clients {
        client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_response(&client.response(false), HELLO);
    }
    assert_eq!(server.connections_per_poller(), vec![1, 1]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut threads = pool_thread_cpus();
    while pin && pinned_workers(&threads) < 2 && Instant::now() < deadline {
        // Polling the threads' state, which nothing signals.
        thread::sleep(Duration::from_millis(10));
        threads = pool_thread_cpus();
    }
    server.stop();
    threads
}

#[test]
fn pins_each_poller_worker_to_a_cpu_of_its_own() {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .map(cpus)
        .unwrap();
    for dispatch in [Dispatch::Local, Dispatch::System] {
        let unpinned = pool_threads_of_a_running_server(dispatch, false);
        assert_eq!(unpinned.len(), 3, "two workers and the scheduler");
        assert!(unpinned.iter().all(|cpus| *cpus == mask), "{unpinned:?}");

        let threads = pool_threads_of_a_running_server(dispatch, true);
        assert_eq!(threads.len(), 3, "two workers and the scheduler");
        if mask.len() < 2 {
            // One CPU cannot show two workers pinned apart from the mask;
            // passing here would claim a check that was not made.
            assert!(
                std::env::var_os("SKIP_PIN_TEST").is_some_and(|v| v == "1"),
                "--pin needs 2 CPUs in the affinity mask to be checked, this process has \
                 {mask:?}: run on 2 or more, or set SKIP_PIN_TEST=1 to skip the check"
            );
            common::say_skipped(&format!(
                "{} CPU(s) for 2 pollers and SKIP_PIN_TEST=1: pinning not checked",
                mask.len()
            ));
            return;
        }
        let mut pinned: Vec<usize> = threads
            .iter()
            .filter(|cpus| cpus.len() == 1)
            .map(|cpus| cpus[0])
            .collect();
        pinned.sort_unstable();
        assert_eq!(pinned, mask[..2].to_vec(), "{dispatch:?}: {threads:?}");
        let whole = threads.iter().filter(|cpus| **cpus == mask).count();
        assert_eq!(whole, 1, "the scheduler keeps the mask: {threads:?}");
    }
}
