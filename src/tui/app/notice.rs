//! The pod view's verdict box: its lines (each verdict, or one notice),
//! word-wrapped to the box and cut to a third of the terminal.

use super::pod_pane::PodStatus;
use super::{terminal_safe, App};
use crate::text::wrap;
use crate::writer::scan::VerdictKind;

/// One line of the pod view's verdict box, already wrapped to the box width.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoticeLine {
    /// The verdict this line belongs to (for its colour); `None` for a notice
    /// such as "no verdicts" or a scan error.
    pub kind: Option<VerdictKind>,
    /// Whether this is an error notice (scan failed).
    pub error: bool,
    /// The text, already passed through [`terminal_safe`].
    pub text: String,
}

impl App {
    /// The pod view's verdict box content, word-wrapped to `width` columns:
    /// each verdict as `kind [pids] message`, or one notice (scan off, scan
    /// failed, gathering, healthy). At most [`App::max_notice_lines`] lines;
    /// the last line then says how many were left out.
    pub fn notice_lines(&self, width: u16) -> Vec<NoticeLine> {
        let width = usize::from(width.max(10));
        let notice = |text: &str, error: bool| -> Vec<NoticeLine> {
            wrap(text, width)
                .into_iter()
                .map(|text| NoticeLine {
                    kind: None,
                    error,
                    text,
                })
                .collect()
        };
        let mut lines = match (self.pod.status(), self.session.snapshot()) {
            (PodStatus::Off, _) => notice("pod scan off (--no-pod)", false),
            (PodStatus::Failed(e), _) => {
                notice(&format!("pod scan failed: {}", terminal_safe(e)), true)
            }
            (PodStatus::Scanning, None) => notice("gathering…", false),
            // An incomplete pod is never "healthy": its notes come first.
            (PodStatus::Scanning, Some(s))
                if s.pod.verdicts.is_empty() && !s.pod.incomplete() && s.pod.node.is_none() =>
            {
                if s.pod.processes.is_empty() {
                    notice(
                        "no pod found: no process carries CLOUD_WRITER_LEASE or has a .writer.lock open",
                        false,
                    )
                } else {
                    notice("no verdicts: the pod looks healthy", false)
                }
            }
            (PodStatus::Scanning, Some(s)) => {
                let mut out = Vec::new();
                // The node view: its tally first.
                if let Some(node) = &s.pod.node {
                    out.extend(notice(&format!("node: {}", node.summary.line()), false));
                }
                // Red only when the pod is in question (Snapshot::pod_in_question).
                for n in &s.pod.notes {
                    out.extend(notice(&terminal_safe(n), s.pod_in_question()));
                }
                for v in &s.pod.verdicts {
                    let pids: Vec<String> = v.pids.iter().map(u32::to_string).collect();
                    let pids = if pids.is_empty() {
                        String::new()
                    } else {
                        format!(" [pid {}]", pids.join(", "))
                    };
                    let pod = v
                        .pod
                        .as_deref()
                        .map(|p| format!(" in {}", terminal_safe(p)))
                        .unwrap_or_default();
                    let text = format!(
                        "{}{pod}{pids}: {}",
                        v.kind.as_str(),
                        terminal_safe(&v.message)
                    );
                    out.extend(wrap(&text, width).into_iter().map(|text| NoticeLine {
                        kind: Some(v.kind),
                        error: false,
                        text,
                    }));
                }
                out
            }
        };
        let max = self.max_notice_lines();
        if lines.len() > max {
            let left = lines.len() - (max - 1);
            lines.truncate(max - 1);
            lines.push(NoticeLine {
                kind: None,
                error: false,
                text: format!("… {left} more line(s): leasectl --json shows every verdict"),
            });
        }
        lines
    }

    /// The most lines the verdict box may use: a third of the terminal, at least 2.
    pub fn max_notice_lines(&self) -> usize {
        usize::from(self.size.1 / 3).max(2)
    }
}
