//! The classic Prometheus text format (0.0.4) from OpenMetrics text, as a
//! stream ([`TextFormatWriter`]): node_exporter's textfile collector parses
//! it, OpenMetrics' `# EOF` and counter naming it does not. The tests hold
//! it against `to_text_format`, the same conversion of a whole text.

#[cfg(test)]
use std::collections::BTreeSet;

/// The classic text format as a stream (for [`super::prometheus::Metrics::write_text_format`]): takes the OpenMetrics text as the encoder
/// writes it and passes each line on, converted, to `out`. A counter's `#
/// HELP` line comes just before its `# TYPE` line, so it is held until the
/// `# TYPE` line says whether its name takes `_total`.
pub(super) struct TextFormatWriter<W> {
    pub(super) out: W,
    /// The current line, not yet complete.
    pub(super) line: String,
    /// A `# HELP` line waiting for its `# TYPE` line.
    pub(super) help: Option<String>,
    /// The first error of `out`.
    pub(super) error: Option<std::io::Error>,
}

impl<W: std::io::Write> TextFormatWriter<W> {
    /// `# HELP name…` or `# TYPE name…` in the classic format (a counter's
    /// name with `_total`).
    fn meta(&mut self, line: &str, counter: bool) -> std::io::Result<()> {
        let (p, rest) = line.split_at("# HELP ".len());
        let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        let total = if counter { "_total" } else { "" };
        writeln!(self.out, "{p}{name}{total} {tail}")
    }

    fn flush_help(&mut self, counter: bool) -> std::io::Result<()> {
        match self.help.take() {
            Some(h) => self.meta(&h, counter),
            None => Ok(()),
        }
    }

    /// One complete line of the OpenMetrics text.
    fn emit(&mut self, line: &str) -> std::io::Result<()> {
        if line == "# EOF" {
            return Ok(());
        }
        if line.starts_with("# HELP ") {
            self.flush_help(false)?;
            self.help = Some(line.to_owned());
            return Ok(());
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split_once(' ').map_or(rest, |(n, _)| n);
            let counter = rest.strip_suffix(" counter").is_some_and(|n| n == name);
            let help_name = self.help.as_deref().map(|h| {
                let r = &h["# HELP ".len()..];
                r.split_once(' ').map_or(r, |(n, _)| n)
            });
            let same = help_name == Some(name);
            self.flush_help(counter && same)?;
            return self.meta(line, counter);
        }
        self.flush_help(false)?;
        writeln!(self.out, "{line}")
    }

    pub(super) fn finish(mut self, encoded: std::fmt::Result) -> std::io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if encoded.is_err() {
            return Err(std::io::Error::other("the metrics could not be encoded"));
        }
        let last = std::mem::take(&mut self.line);
        if !last.is_empty() {
            self.emit(&last)?;
        }
        self.flush_help(false)?;
        self.out.flush()
    }
}

impl<W: std::io::Write> std::fmt::Write for TextFormatWriter<W> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.error.is_some() {
            return Err(std::fmt::Error);
        }
        let mut rest = s;
        while let Some(i) = rest.find('\n') {
            self.line.push_str(&rest[..i]);
            let line = std::mem::take(&mut self.line);
            if let Err(e) = self.emit(&line) {
                self.error = Some(e);
                return Err(std::fmt::Error);
            }
            // Reuse the line's buffer.
            self.line = line;
            self.line.clear();
            rest = &rest[i + 1..];
        }
        self.line.push_str(rest);
        Ok(())
    }
}

/// `Metrics::render` (the tests') in the classic Prometheus text format (0.0.4), which
/// node_exporter's textfile collector parses: a counter's `# HELP` and `#
/// TYPE` name its `_total` sample, and there is no `# EOF`.
#[cfg(test)]
pub(crate) fn to_text_format(openmetrics: &str) -> String {
    let mut counters = BTreeSet::new();
    for l in openmetrics.lines() {
        if let Some(name) = l
            .strip_prefix("# TYPE ")
            .and_then(|r| r.strip_suffix(" counter"))
        {
            counters.insert(name.to_owned());
        }
    }
    let mut out = String::new();
    for l in openmetrics.lines() {
        if l == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .iter()
            .find_map(|p| Some((*p, l.strip_prefix(p)?)));
        match meta {
            Some((p, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(p);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(l),
        }
        out.push('\n');
    }
    out
}
