//! UTC timestamps as RFC 3339 text, for result documents and manifests (no time-zone database,
//! no dependency: the civil-from-days conversion of Howard Hinnant's date algorithms).

use std::time::{SystemTime, UNIX_EPOCH};

/// `2026-11-22T09:14:23.250Z`: UTC, milliseconds.
pub fn rfc3339_millis(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    format!(
        "{}.{:03}Z",
        date_time(d.as_secs() as i64),
        d.subsec_millis()
    )
}

/// `2026-11-22T09:14:23Z`: UTC, whole seconds.
pub fn rfc3339_secs(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    format!("{}Z", date_time(d.as_secs() as i64))
}

/// `YYYY-MM-DDTHH:MM:SS` of a count of seconds since the Unix epoch.
fn date_time(secs: i64) -> String {
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339_millis(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_secs(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_338_863_250);
        assert_eq!(rfc3339_millis(t), "2026-11-22T09:14:23.250Z");
        assert_eq!(rfc3339_secs(t), "2026-11-22T09:14:23Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339_secs(leap), "2000-02-29T00:00:00Z");
        let end = UNIX_EPOCH + Duration::from_secs(4_107_542_399); // 2100-02-28T23:59:59
        assert_eq!(rfc3339_secs(end), "2100-02-28T23:59:59Z");
        let next = end + Duration::from_secs(1); // 2100 is not a leap year
        assert_eq!(rfc3339_secs(next), "2100-03-01T00:00:00Z");
    }
}
