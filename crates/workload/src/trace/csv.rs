//! CSV traces: one record per line, `time,size` or `time,size,stream`.
//!
//! * `time` is a non-negative decimal number (`12`, `0.25`; no exponent) in
//!   the unit given by the caller ([`TimeUnit`]: seconds or milliseconds),
//!   converted exactly to nanoseconds (digits beyond the nanosecond are
//!   rejected rather than rounded silently). Times must not decrease. Offsets
//!   are taken from the first record, so absolute capture times work as is.
//! * `size` is the payload size in bytes (a non-negative integer); records of
//!   size 0 are skipped.
//! * `stream` (optional column) is the stream index for that message.
//! * An optional header line `time,size[,stream]` may come first; blank
//!   lines and lines starting with `#` are ignored; fields may be padded with
//!   spaces.

use serde::{Deserialize, Serialize};
use thinstream_base::Duration;

use super::TraceRecord;
use crate::WorkloadError;

/// Unit of the `time` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimeUnit {
    #[serde(rename = "s")]
    Seconds,
    #[serde(rename = "ms")]
    Milliseconds,
}

impl TimeUnit {
    fn decimals(self) -> u32 {
        match self {
            TimeUnit::Seconds => 9,
            TimeUnit::Milliseconds => 6,
        }
    }
}

fn err(line: usize, reason: impl Into<String>) -> WorkloadError {
    WorkloadError::Csv {
        line,
        reason: reason.into(),
    }
}

/// Exact decimal → nanoseconds.
fn parse_time(text: &str, unit: TimeUnit) -> Option<u64> {
    let (int, frac) = match text.split_once('.') {
        Some((i, f)) => (i, f),
        None => (text, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let d = unit.decimals() as usize;
    if frac.len() > d && frac[d..].bytes().any(|b| b != b'0') {
        return None;
    }
    let scale = 10u64.pow(unit.decimals());
    let int_v: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut frac_v: u64 = 0;
    for i in 0..d {
        let digit = frac.as_bytes().get(i).map_or(0, |b| u64::from(b - b'0'));
        frac_v = frac_v * 10 + digit;
    }
    int_v.checked_mul(scale)?.checked_add(frac_v)
}

/// Parses a CSV trace (see the module docs for the format).
pub fn parse(text: &str, unit: TimeUnit) -> Result<Vec<TraceRecord>, WorkloadError> {
    let mut out = Vec::new();
    let mut first: Option<u64> = None;
    let mut last: u64 = 0;
    let mut seen_data = false;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if !seen_data
            && fields
                .first()
                .is_some_and(|f| f.eq_ignore_ascii_case("time"))
        {
            let names: Vec<String> = fields.iter().map(|f| f.to_ascii_lowercase()).collect();
            if names != ["time", "size"] && names != ["time", "size", "stream"] {
                return Err(err(
                    line_no,
                    format!("header must be time,size[,stream], got {line:?}"),
                ));
            }
            seen_data = true;
            continue;
        }
        seen_data = true;
        if !(2..=3).contains(&fields.len()) {
            return Err(err(
                line_no,
                format!(
                    "expected 2 or 3 comma-separated fields, got {}",
                    fields.len()
                ),
            ));
        }
        let t = parse_time(fields[0], unit).ok_or_else(|| {
            err(
                line_no,
                format!(
                    "time {:?} is not a non-negative decimal number (at most ns precision)",
                    fields[0]
                ),
            )
        })?;
        let bytes: u32 = fields[1]
            .parse()
            .map_err(|_| err(line_no, format!("size {:?} is not a byte count", fields[1])))?;
        let stream = match fields.get(2) {
            Some(s) => Some(s.parse::<u16>().map_err(|_| {
                err(
                    line_no,
                    format!("stream {s:?} is not a number in 0..=65535"),
                )
            })?),
            None => None,
        };
        let t0 = *first.get_or_insert(t);
        if t < last {
            return Err(err(line_no, "time goes backwards"));
        }
        last = t;
        if bytes == 0 {
            continue;
        }
        out.push(TraceRecord {
            offset: Duration::from_nanos(t - t0),
            bytes,
            stream,
        });
    }
    if out.is_empty() {
        return Err(WorkloadError::EmptyTrace {
            reason: "the CSV has no record with a positive size".into(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_seconds_with_header_comments_and_streams() {
        let text = "# captured\ntime,size,stream\n10.5, 100, 2\n\n10.75,0,1\n11.000000001,1448,0\n";
        let r = parse(text, TimeUnit::Seconds).unwrap();
        assert_eq!(
            r,
            [
                TraceRecord {
                    offset: Duration::ZERO,
                    bytes: 100,
                    stream: Some(2)
                },
                TraceRecord {
                    offset: Duration::from_nanos(500_000_001),
                    bytes: 1448,
                    stream: Some(0)
                },
            ]
        );
    }

    #[test]
    fn parses_milliseconds_without_header() {
        let r = parse("0,64\n10,64\n25.5,64\n", TimeUnit::Milliseconds).unwrap();
        let offs: Vec<u64> = r.iter().map(|x| x.offset.as_micros()).collect();
        assert_eq!(offs, [0, 10_000, 25_500]);
        assert!(r.iter().all(|x| x.stream.is_none()));
    }

    #[test]
    fn malformed_input_names_the_line() {
        let cases = [
            ("0,64\n1,abc\n", 2, "size"),
            ("0,64\n-1,64\n", 2, "time"),
            ("0,64\n1e3,64\n", 2, "time"),
            ("5,64\n4,64\n", 2, "backwards"),
            ("0,64,70000\n", 1, "stream"),
            ("0\n", 1, "fields"),
            ("time,bytes\n0,1\n", 1, "header"),
            ("0.0000000001,1\n", 1, "time"),
        ];
        for (text, line, word) in cases {
            match parse(text, TimeUnit::Seconds) {
                Err(WorkloadError::Csv { line: l, reason }) => {
                    assert_eq!(l, line, "{text:?}: {reason}");
                    assert!(reason.contains(word), "{text:?}: {reason}");
                }
                other => panic!("{text:?}: expected a CSV error, got {other:?}"),
            }
        }
        assert!(matches!(
            parse("# nothing\n", TimeUnit::Seconds),
            Err(WorkloadError::EmptyTrace { .. })
        ));
        assert!(matches!(
            parse("0,0\n", TimeUnit::Seconds),
            Err(WorkloadError::EmptyTrace { .. })
        ));
    }
}
