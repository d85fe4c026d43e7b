//! `leasectl serve` as a process under test: started with a config file,
//! its port read from its stderr, killed when dropped; and the path of a
//! probe.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Stdio};

use super::cli::bin;

/// A `leasectl serve` child, killed when dropped.
pub struct Served {
    pub child: Child,
    pub port: u16,
    pub stderr: std::path::PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// `leasectl serve --no-pod --listen 127.0.0.1:0 ARGS` with the config
    /// file `config`, its stderr in `dir/NAME.stderr`.
    pub fn start(dir: &Path, name: &str, config: &Path, args: &[&str]) -> Self {
        let stderr = dir.join(format!("{name}.stderr"));
        let mut c = bin();
        super::s3_env(&mut c);
        let child = c
            .args(["serve", "--no-pod", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("LEASECTL_CONFIG", config)
            .env("XDG_DATA_HOME", dir)
            .env("HOME", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let port = super::lines::serve_port(&stderr);
        Self {
            child,
            port,
            stderr,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

/// The probe path of `target` through `module`.
pub fn probe_path(target: &str, module: &str) -> String {
    let q = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("target", target)
        .append_pair("module", module)
        .finish();
    format!("/probe?{q}")
}
