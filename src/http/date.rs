//! The `Date` header: IMF-fixdate formatting, and the per-poller cache that the
//! poller refreshes at most once a second and connections copy on every batch of
//! responses, without a lock and without allocating. Formatted here rather
//! than by the httpdate crate, which costs more instructions per date
//! (docs/performance.md).
//!
//! The cache is a sequence lock over four atomic words: the poller is its only
//! writer, and in `system` dispatch the readers run on other worker threads, so a
//! reader that races a refresh retries instead of copying a torn date.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const DATE_LEN: usize = 29;

const DAY_NAMES: [&[u8; 3]; 7] = [b"Sun", b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat"];
const MONTH_NAMES: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// Formats `unix_seconds` (seconds since 1970-01-01 UTC) as an IMF-fixdate.
pub fn format_imf_fixdate(unix_seconds: u64) -> [u8; DATE_LEN] {
    let days = unix_seconds / 86_400;
    let second_of_day = unix_seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    // 1970-01-01 was a Thursday.
    let weekday = ((days + 4) % 7) as usize;

    let mut out = [0u8; DATE_LEN];
    out[0..3].copy_from_slice(DAY_NAMES[weekday]);
    out[3..5].copy_from_slice(b", ");
    write_two_digits(&mut out[5..7], day);
    out[7] = b' ';
    out[8..11].copy_from_slice(MONTH_NAMES[(month - 1) as usize]);
    out[11] = b' ';
    write_two_digits(&mut out[12..14], year / 100 % 100);
    write_two_digits(&mut out[14..16], year % 100);
    out[16] = b' ';
    write_two_digits(&mut out[17..19], second_of_day / 3600);
    out[19] = b':';
    write_two_digits(&mut out[20..22], second_of_day / 60 % 60);
    out[22] = b':';
    write_two_digits(&mut out[23..25], second_of_day % 60);
    out[25..29].copy_from_slice(b" GMT");
    out
}

fn write_two_digits(out: &mut [u8], value: u64) {
    out[0] = b'0' + (value / 10 % 10) as u8;
    out[1] = b'0' + (value % 10) as u8;
}

/// Gregorian (year, month 1-12, day 1-31) of a day count since 1970-01-01,
/// by Howard Hinnant's `civil_from_days`, for days on or after the epoch.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Whole seconds since 1970-01-01 UTC; a time before that counts as 0.
pub(crate) fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The current `Date` value of one poller, shared with its connections.
pub(crate) struct DateCache {
    sequence: AtomicU32,
    second: AtomicU64,
    words: [AtomicU64; 4],
}

impl DateCache {
    pub(crate) fn new(now: SystemTime) -> DateCache {
        let cache = DateCache {
            sequence: AtomicU32::new(0),
            second: AtomicU64::new(u64::MAX),
            words: Default::default(),
        };
        cache.refresh(now);
        cache
    }

    /// Reformats the date if `now` is in a later second than the cached one.
    /// Only the owning poller calls this: the cache has a single writer.
    pub(crate) fn refresh(&self, now: SystemTime) {
        let second = unix_seconds(now);
        if self.second.load(Ordering::Relaxed) == second {
            return;
        }
        let mut padded = [0u8; 32];
        padded[..DATE_LEN].copy_from_slice(&format_imf_fixdate(second));

        // An odd sequence number tells readers a write is under way.
        let sequence = self.sequence.load(Ordering::Relaxed);
        self.sequence
            .store(sequence.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (word, bytes) in self.words.iter().zip(padded.chunks_exact(8)) {
            let mut chunk = [0u8; 8];
            chunk.copy_from_slice(bytes);
            word.store(u64::from_ne_bytes(chunk), Ordering::Relaxed);
        }
        self.second.store(second, Ordering::Relaxed);
        self.sequence
            .store(sequence.wrapping_add(2), Ordering::Release);
    }

    /// A consistent copy of the cached date.
    pub(crate) fn current(&self) -> [u8; DATE_LEN] {
        loop {
            let before = self.sequence.load(Ordering::Acquire);
            let mut padded = [0u8; 32];
            for (word, bytes) in self.words.iter().zip(padded.chunks_exact_mut(8)) {
                bytes.copy_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
            }
            fence(Ordering::Acquire);
            if before.is_multiple_of(2) && self.sequence.load(Ordering::Relaxed) == before {
                let mut date = [0u8; DATE_LEN];
                date.copy_from_slice(&padded[..DATE_LEN]);
                return date;
            }
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_known_dates() {
        assert_eq!(&format_imf_fixdate(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(
            &format_imf_fixdate(784_111_777),
            b"Sun, 06 Nov 1994 08:49:37 GMT"
        );
        // A leap day, and the last second of a leap year.
        assert_eq!(
            &format_imf_fixdate(951_782_400),
            b"Tue, 29 Feb 2000 00:00:00 GMT"
        );
        assert_eq!(
            &format_imf_fixdate(1_735_689_599),
            b"Tue, 31 Dec 2024 23:59:59 GMT"
        );
        assert_eq!(
            &format_imf_fixdate(4_102_444_800),
            b"Fri, 01 Jan 2100 00:00:00 GMT"
        );
    }

    #[test]
    fn cache_follows_the_second() {
        let start = UNIX_EPOCH + Duration::from_secs(784_111_777);
        let cache = DateCache::new(start);
        assert_eq!(&cache.current(), b"Sun, 06 Nov 1994 08:49:37 GMT");
        cache.refresh(start + Duration::from_millis(999));
        assert_eq!(&cache.current(), b"Sun, 06 Nov 1994 08:49:37 GMT");
        cache.refresh(start + Duration::from_secs(1));
        assert_eq!(&cache.current(), b"Sun, 06 Nov 1994 08:49:38 GMT");
    }
}
