//! Reading HTTP-dates (RFC 9110 §5.6.7), as `If-Modified-Since` and
//! `If-Range` carry them: the IMF-fixdate every sender must use, and the two
//! obsolete forms a recipient must still accept (RFC 850 and asctime).
//! Anything else is not a date; callers then ignore the header, which is
//! always safe: the full response is a correct answer to any request.
//!
//! Kept rather than the httpdate crate, which costs more instructions per
//! date (docs/performance.md) and places an RFC 850 year by a fixed pivot at
//! 1970 instead of RFC 9110's fifty-years-ahead rule.

use crate::http::date::format_imf_fixdate;

const DAY_NAMES: [&[u8]; 7] = [b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun"];
const LONG_DAY_NAMES: [&[u8]; 7] = [
    b"Monday",
    b"Tuesday",
    b"Wednesday",
    b"Thursday",
    b"Friday",
    b"Saturday",
    b"Sunday",
];
const MONTH_NAMES: [&[u8]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// Seconds since 1970-01-01 UTC of an HTTP-date, or `None` when `value` is
/// not one or lies before 1970. `now` (seconds since 1970) places an RFC 850
/// date's two-digit year. The day name must be a day name but is not checked
/// against the date, as it carries nothing the rest does not.
pub(crate) fn parse_http_date(value: &[u8], now: u64) -> Option<u64> {
    match value.get(3)? {
        b',' => imf_fixdate(value),
        b' ' => asctime(value),
        _ => rfc850(value, now),
    }
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`
fn imf_fixdate(value: &[u8]) -> Option<u64> {
    let [d0, d1, d2, b',', b' ', a0, a1, b' ', m0, m1, m2, b' ', y0, y1, y2, y3, b' ', h0, h1, b':', n0, n1, b':', s0, s1, b' ', b'G', b'M', b'T'] =
        value
    else {
        return None;
    };
    if !DAY_NAMES.contains(&&[*d0, *d1, *d2][..]) {
        return None;
    }
    let year = number(&[*y0, *y1, *y2, *y3])?;
    let day = number(&[*a0, *a1])?;
    let month = month(&[*m0, *m1, *m2])?;
    let time = time_of_day(&[*h0, *h1], &[*n0, *n1], &[*s0, *s1])?;
    seconds(year, month, day, time)
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`
fn rfc850(value: &[u8], now: u64) -> Option<u64> {
    let comma = value.iter().position(|&b| b == b',')?;
    let (day_name, rest) = value.split_at(comma);
    if !LONG_DAY_NAMES.contains(&day_name) {
        return None;
    }
    let [b',', b' ', a0, a1, b'-', m0, m1, m2, b'-', y0, y1, b' ', h0, h1, b':', n0, n1, b':', s0, s1, b' ', b'G', b'M', b'T'] =
        rest
    else {
        return None;
    };
    let two_digit_year = number(&[*y0, *y1])?;
    // RFC 9110 §5.6.7: a year more than 50 years ahead is the most recent
    // past year with the same last two digits.
    let this_year = number(&format_imf_fixdate(now)[12..16])?;
    let mut year = this_year - this_year % 100 + two_digit_year;
    if year > this_year + 50 {
        year -= 100;
    }
    let day = number(&[*a0, *a1])?;
    let month = month(&[*m0, *m1, *m2])?;
    let time = time_of_day(&[*h0, *h1], &[*n0, *n1], &[*s0, *s1])?;
    seconds(year, month, day, time)
}

/// `Sun Nov  6 08:49:37 1994`
fn asctime(value: &[u8]) -> Option<u64> {
    let [d0, d1, d2, b' ', m0, m1, m2, b' ', a0, a1, b' ', h0, h1, b':', n0, n1, b':', s0, s1, b' ', y0, y1, y2, y3] =
        value
    else {
        return None;
    };
    if !DAY_NAMES.contains(&&[*d0, *d1, *d2][..]) {
        return None;
    }
    let day = match (a0, a1) {
        (b' ', digit) => number(&[*digit])?,
        (tens, ones) => number(&[*tens, *ones])?,
    };
    let month = month(&[*m0, *m1, *m2])?;
    let time = time_of_day(&[*h0, *h1], &[*n0, *n1], &[*s0, *s1])?;
    seconds(number(&[*y0, *y1, *y2, *y3])?, month, day, time)
}

/// The value of ASCII digits (never more than four here, so no overflow).
fn number(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0, |value, &digit| {
        digit
            .is_ascii_digit()
            .then(|| value * 10 + u64::from(digit - b'0'))
    })
}

/// The month number, 1 to 12, of a case-sensitive month name.
fn month(name: &[u8]) -> Option<u64> {
    let index = MONTH_NAMES.iter().position(|&known| known == name)?;
    Some(index as u64 + 1)
}

/// Seconds into the day; a leap second (`:60`) is allowed, as the grammar does.
fn time_of_day(hour: &[u8], minute: &[u8], second: &[u8]) -> Option<u64> {
    let (hour, minute, second) = (number(hour)?, number(minute)?, number(second)?);
    (hour < 24 && minute < 60 && second <= 60).then_some(hour * 3600 + minute * 60 + second)
}

fn seconds(year: u64, month: u64, day: u64, time: u64) -> Option<u64> {
    if year < 1970 || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    Some(days_since_epoch(year, month, day) * 86_400 + time)
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a Gregorian date on or after it: whole years
/// counted from a year starting in March, so the leap day ends the year.
fn days_since_epoch(year: u64, month: u64, day: u64) -> u64 {
    let year = if month <= 2 { year - 1 } else { year };
    let (era, year_of_era) = (year / 400, year % 400);
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    // 719,468 days from 0000-03-01 to 1970-01-01.
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sun, 06 Nov 1994 08:49:37 GMT
    const EXAMPLE: u64 = 784_111_777;
    /// Some time in 2025.
    const NOW: u64 = 1_750_000_000;

    fn parse(value: &str) -> Option<u64> {
        parse_http_date(value.as_bytes(), NOW)
    }

    #[test]
    fn reads_all_three_forms_of_the_same_date() {
        assert_eq!(parse("Sun, 06 Nov 1994 08:49:37 GMT"), Some(EXAMPLE));
        assert_eq!(parse("Sunday, 06-Nov-94 08:49:37 GMT"), Some(EXAMPLE));
        assert_eq!(parse("Sun Nov  6 08:49:37 1994"), Some(EXAMPLE));
        assert_eq!(
            parse("Sun Nov 16 08:49:37 1994"),
            Some(EXAMPLE + 10 * 86_400)
        );
    }

    #[test]
    fn reads_back_every_formatted_date() {
        for seconds in [0, 951_782_400, 1_735_689_599, 4_102_444_800, NOW] {
            let formatted = format_imf_fixdate(seconds);
            assert_eq!(parse_http_date(&formatted, NOW), Some(seconds));
        }
    }

    #[test]
    fn places_a_two_digit_year_within_fifty_years_ahead() {
        let in_2070 = parse("Tuesday, 01-Jan-70 00:00:00 GMT");
        assert_eq!(in_2070, parse("Wed, 01 Jan 2070 00:00:00 GMT"));
        let in_1976 = parse("Thursday, 01-Jan-76 00:00:00 GMT");
        assert_eq!(in_1976, parse("Thu, 01 Jan 1976 00:00:00 GMT"));
    }

    #[test]
    fn refuses_what_is_not_an_http_date() {
        for value in [
            "",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 08:49:37 gmt",
            "sun, 06 Nov 1994 08:49:37 GMT",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 nov 1994 08:49:37 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 29 Feb 1900 08:49:37 GMT",
            "Sun, 00 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT",
            "Sun, 06 Nov 1969 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT ",
            "Sun, 06 Nov 1994 08:49:37",
            "Xyz, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-1994 08:49:37 GMT",
            "Sun, 06-Nov-94 08:49:37 GMT",
            "Sun Nov 6 08:49:37 1994",
            "1994-11-06T08:49:37Z",
            "784111777",
        ] {
            assert_eq!(parse(value), None, "{value:?}");
        }
    }
}
