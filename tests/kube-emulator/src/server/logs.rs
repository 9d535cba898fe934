//! `pods/<name>/log`: a pod's log, read from the file its owner attached to it at start
//! (`Options::pod_logs`, `--pod-log NAMESPACE/POD=FILE`). Nothing runs pods here, so a pod with
//! no attached file has an empty log.

use super::*;

impl Call<'_> {
    pub(super) fn pod_log(
        &self,
        info: &ResourceInfo,
        path: &ResourcePath,
        namespace: &str,
    ) -> ApiResult<Response> {
        let name = path.name.as_deref().unwrap_or_default();
        let pod = self
            .app
            .lock()?
            .get(&info.key(), namespace, name)
            .ok_or_else(|| {
                ApiError::not_found(
                    &crate::status::ResourceName {
                        group: &info.group,
                        plural: &info.plural,
                    },
                    name,
                )
            })?;
        let containers: Vec<&str> = pod
            .value
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|c| c["name"].as_str())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        match self.param("container") {
            Some(container) if !containers.contains(&container) => {
                return Err(ApiError::bad_request(format!(
                    "container {container} is not valid for pod {name}"
                )));
            }
            None if containers.len() > 1 => {
                return Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    containers.join(" ")
                )));
            }
            _ => {}
        }
        let options = LogOptions {
            tail_lines: self.positive("tailLines", true)?,
            since_seconds: self.positive("sinceSeconds", false)?,
            limit_bytes: self.positive("limitBytes", false)?,
            now: jiff::Timestamp::now(),
        };
        let text = self
            .app
            .pod_logs
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|file| std::fs::read_to_string(file).unwrap_or_default())
            .unwrap_or_default();
        let mut response = Response::new(Body::from(options.select(&text)));
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        Ok(response)
    }

    /// A whole-number query parameter: at least 1, or 0 too when `zero` is allowed.
    fn positive(&self, name: &str, zero: bool) -> ApiResult<Option<u64>> {
        let Some(text) = self.param(name) else {
            return Ok(None);
        };
        match text.parse::<u64>() {
            Ok(n) if n > 0 || zero => Ok(Some(n)),
            _ => Err(ApiError::bad_request(format!(
                "{name}: Invalid value: {text:?}: must be {} integer",
                if zero { "a non-negative" } else { "a positive" }
            ))),
        }
    }
}

/// What part of a log a request asked for.
struct LogOptions {
    tail_lines: Option<u64>,
    since_seconds: Option<u64>,
    limit_bytes: Option<u64>,
    now: jiff::Timestamp,
}

impl LogOptions {
    /// The lines newer than `sinceSeconds` (lines whose time cannot be read are kept), the last
    /// `tailLines` of those, cut at `limitBytes`.
    fn select(&self, text: &str) -> String {
        let cutoff = self
            .since_seconds
            .and_then(|s| i64::try_from(s).ok())
            .and_then(|s| {
                self.now
                    .checked_sub(jiff::SignedDuration::from_secs(s))
                    .ok()
            });
        let mut lines: Vec<&str> = text
            .split_inclusive('\n')
            .filter(|line| match (cutoff, line_time(line)) {
                (Some(cutoff), Some(time)) => time >= cutoff,
                _ => true,
            })
            .collect();
        if let Some(tail) = self.tail_lines.and_then(|t| usize::try_from(t).ok()) {
            lines.drain(..lines.len().saturating_sub(tail));
        }
        let mut selected = lines.concat();
        if let Some(limit) = self.limit_bytes.and_then(|l| usize::try_from(l).ok())
            && selected.len() > limit
        {
            let mut end = limit;
            while !selected.is_char_boundary(end) {
                end -= 1;
            }
            selected.truncate(end);
        }
        selected
    }
}

/// When a log line was written: its JSON `timestamp` field, or an RFC 3339 time opening it.
fn line_time(line: &str) -> Option<jiff::Timestamp> {
    let line = line.trim();
    if line.starts_with('{') {
        let value: Value = serde_json::from_str(line).ok()?;
        return ["timestamp", "time", "ts"]
            .iter()
            .find_map(|field| value[field].as_str()?.parse().ok());
    }
    line.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(tail: Option<u64>, since: Option<u64>, limit: Option<u64>) -> LogOptions {
        LogOptions {
            tail_lines: tail,
            since_seconds: since,
            limit_bytes: limit,
            now: "2025-01-01T12:00:00Z".parse().unwrap(),
        }
    }

    const LOG: &str = "{\"timestamp\":\"2025-01-01T10:00:00Z\",\"message\":\"old\"}\n\
                       2025-01-01T11:59:00Z recent text line\n\
                       no time at all\n\
                       {\"timestamp\":\"2025-01-01T11:59:30.5Z\",\"message\":\"new\"}\n";

    #[test]
    fn the_whole_log_without_options() {
        assert_eq!(options(None, None, None).select(LOG), LOG);
    }

    #[test]
    fn tail_lines_keeps_the_last_lines() {
        let tail = options(Some(2), None, None).select(LOG);
        assert_eq!(tail.lines().count(), 2);
        assert!(tail.ends_with("\"new\"}\n") && tail.starts_with("no time"));
        assert_eq!(options(Some(0), None, None).select(LOG), "");
        assert_eq!(options(Some(99), None, None).select(LOG), LOG);
    }

    #[test]
    fn since_seconds_drops_older_lines_and_keeps_undated_ones() {
        let recent = options(None, Some(600), None).select(LOG);
        assert!(!recent.contains("old"));
        assert!(recent.contains("recent") && recent.contains("no time") && recent.contains("new"));
        assert_eq!(
            options(None, Some(45), Some(1000))
                .select(LOG)
                .lines()
                .count(),
            2
        );
    }

    #[test]
    fn limit_bytes_cuts_the_text() {
        assert_eq!(options(None, None, Some(5)).select(LOG), "{\"tim");
        assert_eq!(options(None, None, Some(2)).select("é\n"), "é");
    }
}
