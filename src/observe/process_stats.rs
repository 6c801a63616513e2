//! The standard process series for `/metrics`, read from Linux's /proc and
//! getrlimit at scrape time. A value that cannot be read is left out rather
//! than reported as zero, which would be a false reading.

use std::fs;

/// What the process uses, as far as it could be read.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct ProcessStats {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    /// Seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
}

impl ProcessStats {
    pub(crate) fn read() -> ProcessStats {
        // SAFETY: sysconf only reads configuration values.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        // SAFETY: as above.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let stat = fs::read_to_string("/proc/self/stat").ok();
        let fields = stat.as_deref().and_then(stat_fields);
        let field = |n: usize| fields.as_ref().and_then(|f| f.get(n)?.parse::<u64>().ok());
        let per_tick = (ticks > 0).then(|| 1.0 / ticks as f64);
        let cpu_seconds = match (field(14), field(15), per_tick) {
            (Some(user), Some(system), Some(per_tick)) => Some((user + system) as f64 * per_tick),
            _ => None,
        };
        let boot = fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|text| boot_time(&text));
        let start_time_seconds = match (field(22), boot, per_tick) {
            (Some(start), Some(boot), Some(per_tick)) => {
                Some(boot as f64 + start as f64 * per_tick)
            }
            _ => None,
        };
        let resident_pages = fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|text| text.split_whitespace().nth(1)?.parse::<u64>().ok());
        let resident_bytes = match (resident_pages, u64::try_from(page)) {
            (Some(pages), Ok(page)) => Some(pages * page),
            _ => None,
        };
        let open_fds = fs::read_dir("/proc/self/fd")
            .ok()
            .map(|entries| entries.filter(Result::is_ok).count() as u64);
        ProcessStats {
            cpu_seconds,
            resident_bytes,
            open_fds,
            max_fds: max_fds(),
            start_time_seconds,
        }
    }
}

/// The fields of /proc/self/stat numbered as proc(5) does (1-based), with
/// field 2, the command name in parentheses, skipped: it may hold spaces and
/// parentheses, so the fields after it are found after its last ')'.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let (pid, rest) = stat.split_once(" (")?;
    let after_name = &rest[rest.rfind(')')? + 1..];
    let mut fields = vec!["", pid, ""];
    fields.extend(after_name.split_whitespace());
    Some(fields)
}

/// `btime` in /proc/stat: when the system booted, in seconds since the epoch.
fn boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

/// The soft limit on open descriptors, if there is one.
fn max_fds() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    (limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_survive_a_command_name_with_spaces_and_parentheses() {
        let stat = "42 (a) b (c) S 1 42 42 0 -1 0 0 0 0 0 7 3";
        let fields = stat_fields(stat).unwrap();
        assert_eq!(fields[1], "42");
        assert_eq!(fields[3], "S");
        assert_eq!(fields[14], "7");
        assert_eq!(fields[15], "3");
    }

    #[test]
    fn boot_time_is_the_btime_line() {
        assert_eq!(
            boot_time("cpu 1 2\nbtime 1700000000\nprocesses 9\n"),
            Some(1700000000)
        );
        assert_eq!(boot_time("cpu 1 2\n"), None);
    }

    #[test]
    fn this_process_can_be_read() {
        let stats = ProcessStats::read();
        assert!(stats.cpu_seconds.is_some());
        assert!(stats.resident_bytes.is_some_and(|bytes| bytes > 0));
        assert!(stats.open_fds.is_some_and(|fds| fds > 0));
        assert!(stats.start_time_seconds.is_some_and(|t| t > 1.0e9));
    }
}
