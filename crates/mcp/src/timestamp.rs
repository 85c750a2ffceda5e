//! Creation times (pure): takes a Kubernetes RFC 3339 time (`metadata.creationTimestamp`) and yields the protobuf
//! `Timestamp` MCP metadata carries, and back (UTC, `Z`, fractional seconds only when there are some).

use envoy_types::pb::google::protobuf::Timestamp;
use k8s_openapi::jiff;

/// Why a time could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The text is not an RFC 3339 time.
    #[error("{text:?} is not an RFC 3339 time: {reason}")]
    Text {
        /// The text as given.
        text: String,
        /// The parser's explanation.
        reason: String,
    },
    /// The timestamp is outside the range of RFC 3339 times (years 1 to 9999 and a valid nanosecond count).
    #[error("seconds {seconds}, nanos {nanos} is not a time between years 1 and 9999")]
    Range {
        /// Seconds since the Unix epoch.
        seconds: i64,
        /// Nanoseconds within the second.
        nanos: i32,
    },
}

/// The result of this module's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Parses an RFC 3339 time into a protobuf timestamp.
pub fn from_rfc3339(text: &str) -> Result<Timestamp> {
    let time: jiff::Timestamp = text.parse().map_err(|e: jiff::Error| Error::Text {
        text: text.to_string(),
        reason: e.to_string(),
    })?;
    // jiff gives a time before 1970 negative nanoseconds; protobuf counts them forward from the second before.
    let (seconds, nanos) = match time.subsec_nanosecond() {
        nanos if nanos < 0 => (time.as_second() - 1, nanos + 1_000_000_000),
        nanos => (time.as_second(), nanos),
    };
    Ok(Timestamp { seconds, nanos })
}

/// Formats a protobuf timestamp as an RFC 3339 time in UTC.
pub fn to_rfc3339(timestamp: &Timestamp) -> Result<String> {
    let range = || Error::Range {
        seconds: timestamp.seconds,
        nanos: timestamp.nanos,
    };
    if timestamp.nanos < 0 {
        return Err(range());
    }
    let time = jiff::Timestamp::new(timestamp.seconds, timestamp.nanos).map_err(|_| range())?;
    // jiff's range reaches years -9999 and 9999; RFC 3339 (and Go's proto validation) stop at year 1.
    if time < jiff::Timestamp::constant(-62_135_596_800, 0) {
        return Err(range());
    }
    Ok(time.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_times_round_trip() {
        for text in [
            "2024-03-01T12:34:56Z",
            "1970-01-01T00:00:00Z",
            "2024-03-01T12:34:56.5Z",
            "1969-12-31T23:59:58.25Z",
        ] {
            let timestamp = from_rfc3339(text).unwrap();
            assert_eq!(to_rfc3339(&timestamp).unwrap(), text);
        }
        assert_eq!(
            from_rfc3339("2024-03-01T12:34:56Z").unwrap(),
            Timestamp {
                seconds: 1_709_296_496,
                nanos: 0
            }
        );
    }

    #[test]
    fn times_before_1970_have_positive_nanos() {
        assert_eq!(
            from_rfc3339("1969-12-31T23:59:58.25Z").unwrap(),
            Timestamp {
                seconds: -2,
                nanos: 250_000_000
            }
        );
    }

    #[test]
    fn offsets_are_converted_to_utc() {
        let timestamp = from_rfc3339("2024-03-01T14:34:56+02:00").unwrap();
        assert_eq!(to_rfc3339(&timestamp).unwrap(), "2024-03-01T12:34:56Z");
    }

    #[test]
    fn bad_text_and_out_of_range_timestamps_are_errors() {
        let err = from_rfc3339("yesterday").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("\"yesterday\" is not an RFC 3339 time"),
            "{err}"
        );
        for (seconds, nanos) in [
            (0, -1),
            (0, 1_000_000_000),
            (i64::MAX, 0),
            (-62_135_596_801, 0),
        ] {
            let err = to_rfc3339(&Timestamp { seconds, nanos }).unwrap_err();
            assert_eq!(err, Error::Range { seconds, nanos });
        }
    }
}
