//! Contexts: named sets of TARGETs and connection defaults in a TOML file,
//! like kubectl contexts or AWS profiles.
//!
//! The file is `$LEASECTL_CONFIG` when set, else `config.toml` in the
//! platform configuration directory (`~/.config/leasectl/config.toml` on
//! Linux). Example:
//!
//! ```toml
//! default_context = "prod"
//!
//! [contexts.prod]
//! targets = ["s3://backups/db/"]
//! endpoint_url = "https://minio.example:9000"
//! region = "eu-west-1"
//! profile = "backup-ops"
//! path_style = true
//! refresh = "5s"     # the console's refresh
//! ttl = "30s"        # the default --ttl of takeovers (console and `leasectl takeover`)
//! depth = 2
//! record_format = "seed"  # the LEASE records written: leasectl (default) or seed
//! concurrency = 32   # as --concurrency
//! conditional = "on" # as --conditional (off: best-effort)
//! # What a scrape's probe may read with `module=prod` (`serve --module prod`):
//! # these TARGETs and those under them (default: `targets`).
//! allow = ["s3://backups/", "s3://archive/tenants/"]
//! ```
//!
//! `leasectl -c prod` applies a context; `leasectl` with no TARGET (and no
//! command) applies `default_context` when one is set. Values given on the
//! command line win over the context's (`setup::prepare` applies it, once,
//! to the arguments of the command that runs). Every value is validated by the
//! same rules as the matching flag; an endpoint carrying credentials is
//! refused and never shown.

use crate::exit::tell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::bucket::{parse_ttl, RecordFormat};
use crate::logfile::warn_if_world_writable;
use crate::store::s3::redact_url;
use crate::target::Target;
use crate::text::sanitize;
use crate::values::{check_endpoint, parse_duration, parse_plain_name, parse_profile};

/// The environment variable that overrides the config file's path.
pub(crate) const CONFIG_ENV: &str = "LEASECTL_CONFIG";

/// Largest config file read (a config is a few lines).
const MAX_BYTES: u64 = 1024 * 1024;

/// The file as written (before validation).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfigFile {
    /// The context applied when `leasectl` is run with no TARGET.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) default_context: Option<String>,
    /// Contexts by name.
    #[serde(default)]
    pub contexts: BTreeMap<String, ContextFile>,
}

/// One context as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ContextFile {
    /// TARGET URLs: `s3://bucket/path/` or `file:///dir/`.
    #[serde(default)]
    pub targets: Vec<String>,
    /// S3 endpoint (`http(s)://host[:port]`, no credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_url: Option<String>,
    /// AWS region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// AWS profile name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Path-style addressing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_style: Option<bool>,
    /// The console's refresh interval (a duration such as `5s`; at least 1 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh: Option<String>,
    /// The default `--ttl` of takeovers (whole seconds, 3 s to 1 h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// Discovery depth under each TARGET.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    /// The fields of the LEASE records written (`leasectl` or `seed`) by
    /// `bucket hold`, `takeover` and the console's takeovers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_format: Option<String>,
    /// Requests in flight at once per TARGET (1 to 1024), as `--concurrency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u16>,
    /// The exclusion mode, as `--conditional`: `on` or `off` (best-effort).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditional: Option<String>,
    /// The TARGETs a scrape's probe may read through this context as a
    /// module of `serve --module` (those at or under one of them); when
    /// empty, its `targets`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
}

/// A validated context.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Context {
    /// Its name.
    pub name: String,
    /// The TARGETs, parsed.
    pub targets: Vec<Target>,
    /// S3 endpoint, checked ([`crate::values::check_endpoint`]).
    pub endpoint_url: Option<String>,
    /// AWS region.
    pub region: Option<String>,
    /// AWS profile.
    pub profile: Option<String>,
    /// Path-style addressing.
    pub path_style: Option<bool>,
    /// The console's refresh interval (at least 1 s).
    pub refresh: Option<Duration>,
    /// The default TTL of takeovers (whole seconds, 3 s to 1 h).
    pub ttl: Option<Duration>,
    /// Discovery depth.
    pub depth: Option<u32>,
    /// The fields of the LEASE records written.
    pub record_format: Option<RecordFormat>,
    /// Requests in flight at once per TARGET (1 to 1024).
    pub concurrency: Option<u16>,
    /// Best-effort mode (`conditional = "off"`): `Some(false)`; `on`: `Some(true)`.
    pub conditional: Option<bool>,
    /// What a probe through this context may read, as written (`allow`);
    /// [`Context::probe_allow`] is what it may read.
    pub allow: Vec<Target>,
}

impl Context {
    /// The TARGETs a scrape's probe may read through this context (at or
    /// under each): its `allow` list, else its `targets`.
    pub(crate) fn probe_allow(&self) -> &[Target] {
        if self.allow.is_empty() {
            &self.targets
        } else {
            &self.allow
        }
    }
}

/// A validated config file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Config {
    /// Where it was read from.
    pub path: PathBuf,
    /// The default context's name (known to exist).
    pub(crate) default_context: Option<String>,
    /// Contexts by name.
    pub contexts: BTreeMap<String, Context>,
}

/// Why the config could not be used. Every message names the file and says
/// what to do; none repeats a credential.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    /// No home directory and no `LEASECTL_CONFIG`.
    #[error(
        "there is no configuration directory on this system; set {CONFIG_ENV} to the path of a config file"
    )]
    NoPath,
    /// A context was asked for but there is no file.
    #[error(
        "context `{name}` was asked for, but there is no config file at {}; create it with a \
         [contexts.{name}] table (see docs/targets.md, \"Contexts\")",
        .path.display()
    )]
    Missing {
        /// The file looked for.
        path: PathBuf,
        /// The context asked for (escaped).
        name: String,
    },
    /// The file could not be read.
    #[error("cannot read the config file {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not valid TOML, or not the expected shape.
    #[error("the config file {}{} is not valid: {message}; fix it or see `leasectl config view`", .path.display(), .at)]
    Parse {
        /// The file.
        path: PathBuf,
        /// `:LINE:COLUMN` when known, else empty.
        at: String,
        /// What the TOML parser said (escaped).
        message: String,
    },
    /// A value that is not acceptable.
    #[error("the config file {}, context `{context}`, {field}: {why}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The context (escaped).
        context: String,
        /// The field.
        field: &'static str,
        /// Why, and what to do (never the value of a credential).
        why: String,
    },
    /// A context name that is not defined.
    #[error(
        "there is no context `{name}` in {}; {}",
        .path.display(),
        known_list(.known)
    )]
    UnknownContext {
        /// The file.
        path: PathBuf,
        /// The name asked for (escaped).
        name: String,
        /// The contexts defined (escaped).
        known: Vec<String>,
    },
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        "it defines no context yet: add a [contexts.NAME] table".to_owned()
    } else {
        format!("the contexts defined are: {}", known.join(", "))
    }
}

/// The config file's path: `$LEASECTL_CONFIG`, else `config.toml` in the
/// platform configuration directory.
pub(crate) fn path() -> Result<PathBuf, ConfigError> {
    if let Some(p) = std::env::var_os(CONFIG_ENV).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    directories::ProjectDirs::from("", "", "leasectl")
        .map(|d| d.config_dir().join("config.toml"))
        .ok_or(ConfigError::NoPath)
}

/// Reads and validates the file at `path`; `Ok(None)` when it does not exist.
pub(crate) fn load(path: &Path) -> Result<Option<Config>, ConfigError> {
    let read_err = |source| ConfigError::Read {
        path: path.to_owned(),
        source,
    };
    let text = match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
        Ok(md) if !md.is_file() => {
            return Err(read_err(std::io::Error::other("it is not a regular file")))
        }
        Ok(md) if md.len() > MAX_BYTES => {
            return Err(read_err(std::io::Error::other(
                "it is larger than 1 MiB, which no config is",
            )))
        }
        Ok(md) => {
            warn_if_world_writable(
                path,
                &md,
                "anyone on this host could change which stores and endpoints leasectl uses",
            );
            std::fs::read_to_string(path).map_err(read_err)?
        }
    };
    parse(path, &text).map(Some)
}

/// Parses and validates `text` (read from `path`, for messages).
pub(crate) fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
    let file: ConfigFile = toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: path.to_owned(),
        at: e
            .span()
            .map(|s| {
                let (l, c) = line_col(text, s.start);
                format!(":{l}:{c}")
            })
            .unwrap_or_default(),
        message: sanitize(e.message().trim()),
    })?;
    validate(path, file)
}

/// 1-based line and column of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(offset.min(text.len()))];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

fn validate(path: &Path, file: ConfigFile) -> Result<Config, ConfigError> {
    let mut contexts = BTreeMap::new();
    for (name, c) in file.contexts {
        let shown = sanitize(&name);
        let invalid = |field: &'static str, why: String| ConfigError::Invalid {
            path: path.to_owned(),
            context: shown.clone(),
            field,
            why,
        };
        if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(invalid(
                "name",
                "a context name must be non-empty, without spaces or control characters".into(),
            ));
        }
        let mut targets = Vec::new();
        for t in &c.targets {
            targets.push(
                t.parse::<Target>()
                    .map_err(|e| invalid("targets", e.to_string()))?,
            );
        }
        if let Some(e) = &c.endpoint_url {
            // The message is built from the redacted URL only.
            check_endpoint(e).map_err(|why| invalid("endpoint_url", why))?;
        }
        if let Some(r) = &c.region {
            parse_plain_name(r).map_err(|why| invalid("region", why))?;
        }
        if let Some(p) = &c.profile {
            parse_profile(p).map_err(|why| invalid("profile", why))?;
        }
        let refresh = match &c.refresh {
            Some(s) => {
                let d = parse_duration(s).map_err(|why| invalid("refresh", why))?;
                if d < Duration::from_secs(1) {
                    return Err(invalid("refresh", "a refresh must be at least 1s".into()));
                }
                Some(d)
            }
            None => None,
        };
        let ttl = match &c.ttl {
            Some(s) => Some(parse_ttl(s).map_err(|why| invalid("ttl", why))?),
            None => None,
        };
        let mut allow = Vec::new();
        for t in &c.allow {
            allow.push(
                t.parse::<Target>()
                    .map_err(|e| invalid("allow", e.to_string()))?,
            );
        }
        if let Some(n) = c.concurrency {
            if !(1..=1024).contains(&n) {
                return Err(invalid(
                    "concurrency",
                    format!("{n} is not between 1 and 1024"),
                ));
            }
        }
        let conditional = match c.conditional.as_deref() {
            None => None,
            Some("on") => Some(true),
            Some("off") => Some(false),
            Some(other) => {
                return Err(invalid(
                    "conditional",
                    format!(
                        "`{}` is neither on nor off (off: best-effort)",
                        sanitize(other)
                    ),
                ))
            }
        };
        let record_format = match &c.record_format {
            Some(s) => Some(
                s.parse::<RecordFormat>()
                    .map_err(|why| invalid("record_format", why))?,
            ),
            None => None,
        };
        contexts.insert(
            name.clone(),
            Context {
                name,
                targets,
                endpoint_url: c.endpoint_url,
                region: c.region,
                profile: c.profile,
                path_style: c.path_style,
                refresh,
                ttl,
                depth: c.depth,
                record_format,
                concurrency: c.concurrency,
                conditional,
                allow,
            },
        );
    }
    let config = Config {
        path: path.to_owned(),
        default_context: None,
        contexts,
    };
    if let Some(d) = &file.default_context {
        config.context(d)?;
    }
    Ok(Config {
        default_context: file.default_context,
        ..config
    })
}

impl Config {
    /// The context `name`, or [`ConfigError::UnknownContext`] listing those defined.
    pub(crate) fn context(&self, name: &str) -> Result<&Context, ConfigError> {
        self.contexts
            .get(name)
            .ok_or_else(|| ConfigError::UnknownContext {
                path: self.path.clone(),
                name: sanitize(name),
                known: self.contexts.keys().map(|k| sanitize(k)).collect(),
            })
    }

    /// The file, normalised: TARGETs as leasectl writes them, durations in
    /// humantime form, endpoints with any user information redacted.
    pub(crate) fn to_toml(&self) -> String {
        let file = ConfigFile {
            default_context: self.default_context.clone(),
            contexts: self
                .contexts
                .iter()
                .map(|(n, c)| {
                    (
                        n.clone(),
                        ContextFile {
                            targets: c.targets.iter().map(|t| t.to_string()).collect(),
                            endpoint_url: c.endpoint_url.as_deref().map(|e| redact_url(e).0),
                            region: c.region.clone(),
                            profile: c.profile.clone(),
                            path_style: c.path_style,
                            refresh: c.refresh.map(|d| humantime::format_duration(d).to_string()),
                            ttl: c.ttl.map(|d| humantime::format_duration(d).to_string()),
                            depth: c.depth,
                            record_format: c.record_format.map(|f| f.as_str().to_owned()),
                            concurrency: c.concurrency,
                            conditional: c
                                .conditional
                                .map(|on| if on { "on" } else { "off" }.to_owned()),
                            allow: c.allow.iter().map(|t| t.to_string()).collect(),
                        },
                    )
                })
                .collect(),
        };
        toml::to_string_pretty(&file).unwrap_or_default()
    }
}

/// The context to apply: `asked` (`-c NAME`), else the default context when
/// `bare` (no command, no TARGET). `Ok(None)`: none applies.
///
/// Errors: a named context with no file or not in it; a file that cannot be
/// read or is invalid (only when a context is asked for or `bare`). A
/// default file (no `-c`, no `LEASECTL_CONFIG`) that cannot be read is not
/// an error: a one-line warning on stderr, and no context applies (as git
/// does with an unreadable global config), so a pod-only command run with
/// another user's `HOME` still runs.
pub(crate) fn select(asked: Option<&str>, bare: bool) -> Result<Option<Context>, ConfigError> {
    if asked.is_none() && !bare {
        return Ok(None);
    }
    let path = match path() {
        Ok(p) => p,
        // Without a home there is no default: only a named context is an error.
        Err(e) if asked.is_some() => return Err(e),
        Err(_) => return Ok(None),
    };
    let explicit = asked.is_some() || std::env::var_os(CONFIG_ENV).is_some_and(|p| !p.is_empty());
    let loaded = match load(&path) {
        Err(e @ ConfigError::Read { .. }) if !explicit => {
            tell(format_args!(
                "warning: {}; going on without contexts (only -c NAME or {CONFIG_ENV} \
                 make this an error)",
                sanitize(&e.to_string())
            ));
            return Ok(None);
        }
        r => r?,
    };
    let Some(config) = loaded else {
        return match asked {
            Some(name) => Err(ConfigError::Missing {
                path,
                name: sanitize(name),
            }),
            None => Ok(None),
        };
    };
    let name = match (asked, &config.default_context) {
        (Some(n), _) => n.to_owned(),
        (None, Some(d)) => d.clone(),
        (None, None) => return Ok(None),
    };
    config.context(&name).cloned().map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::bucket::RecordFormat;

    fn p() -> &'static Path {
        Path::new("/etc/leasectl.toml")
    }

    #[test]
    fn parses_normalises_and_redacts() {
        let c = parse(
            p(),
            r#"
default_context = "prod"
[contexts.prod]
targets = ["s3://backups/db/", "file:///srv/leases/"]
endpoint_url = "https://minio.example:9000"
path_style = true
refresh = "2s"
ttl = "1m"
depth = 2
record_format = "seed"
"#,
        )
        .unwrap();
        let prod = c.context("prod").unwrap();
        assert_eq!(prod.targets.len(), 2);
        assert_eq!(prod.refresh, Some(Duration::from_secs(2)));
        assert_eq!(prod.ttl, Some(Duration::from_secs(60)));
        assert_eq!(prod.record_format, Some(RecordFormat::Seed));
        let view = c.to_toml();
        assert!(view.contains("ttl = \"1m\""), "{view}");
        assert!(view.contains("record_format = \"seed\""), "{view}");
        assert!(view.contains("default_context = \"prod\""), "{view}");
        // The normalised view parses back to the same config.
        assert_eq!(parse(p(), &view).unwrap(), c);
    }

    #[test]
    fn errors_are_sentences_with_where_and_what_to_do() {
        let e = parse(p(), "[contexts.prod]\ntargets = [\"s3://b/\"]\nfoo = 1\n").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("/etc/leasectl.toml:3:1"), "{msg}");
        assert!(msg.contains("unknown field `foo`"), "{msg}");

        let e = parse(p(), "default_context = \"stage\"\n[contexts.prod]\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "there is no context `stage` in /etc/leasectl.toml; the contexts defined are: prod"
        );

        let e = parse(
            p(),
            "[contexts.prod]\nendpoint_url = \"https://AKIAXXXX:s3cr3t@minio:9000\"\n",
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("carries credentials"), "{msg}");
        assert!(
            !msg.contains("s3cr3t") && !msg.contains("AKIAXXXX"),
            "{msg}"
        );

        let e = parse(p(), "[contexts.prod]\nttl = \"2h\"\n").unwrap_err();
        assert!(
            e.to_string().contains("context `prod`, ttl: a TTL must be"),
            "{e}"
        );
        let e = parse(p(), "[contexts.prod]\nrecord_format = \"json\"\n").unwrap_err();
        assert!(
            e.to_string()
                .contains("context `prod`, record_format: unknown record format `json`"),
            "{e}"
        );
        let e = parse(p(), "[contexts.prod]\ntargets = [\"ftp://x/\"]\n").unwrap_err();
        assert!(e.to_string().contains("context `prod`, targets: "), "{e}");
    }

    #[test]
    fn line_and_column_count_characters() {
        assert_eq!(line_col("ab\ncdé\nx", 8), (3, 1));
        assert_eq!(line_col("ab\ncdé", 5), (2, 3));
        assert_eq!(line_col("", 10), (1, 1));
    }
}
