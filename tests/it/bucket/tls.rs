//! HTTPS to a service whose certificate a private CA signed: moto on
//! loopback serving TLS with a certificate made here by openssl. leasectl
//! trusts the CA from `AWS_CA_BUNDLE` or a profile's `ca_bundle`, as the aws
//! CLI does, and says so when it does not.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{bin, repo, run_with_timeout};

fn openssl(dir: &Path, args: &[&str]) {
    let ok = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl")
        .success();
    assert!(ok, "openssl {args:?}");
}

/// A CA, and a certificate for 127.0.0.1 signed by it, in `dir`.
fn make_certs(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=leasectl test CA",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "srv.key",
            "-out",
            "srv.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "srv.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "srv.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
}

#[test]
fn a_private_ca_is_trusted_from_aws_ca_bundle_or_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    make_certs(dir.path());
    let venv = std::env::var_os("LEASECTL_VENV_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv"));
    let mut server = Command::new(venv.join("moto-5.2.5/bin/python"))
        .arg(repo().join("scripts/moto_server.py"))
        .arg("--tls")
        .args([dir.path().join("srv.pem"), dir.path().join("srv.key")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("moto over TLS");
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let endpoint = format!("https://127.0.0.1:{}", line.trim());
    let json = |env: &[(&str, String)]| {
        let mut c = bin();
        c.env_remove("AWS_CA_BUNDLE")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .args([
                "--endpoint-url",
                &endpoint,
                "--path-style",
                "--timeout",
                "5s",
            ])
            .args(["--json", "--no-pod", "s3://no-such-bucket/"]);
        let out = run_with_timeout(c, Duration::from_secs(60));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Untrusted: the TLS sentence with the hint.
    let err = json(&[]);
    assert!(
        err.contains("TLS: the certificate of 127.0.0.1 is not trusted")
            && err.contains("AWS_CA_BUNDLE"),
        "{err}"
    );
    // Trusted through AWS_CA_BUNDLE: the request reached moto (which knows no such bucket).
    let ca = dir.path().join("ca.pem").display().to_string();
    let err = json(&[("AWS_CA_BUNDLE", ca.clone())]);
    assert!(!err.contains("TLS"), "{err}");
    assert!(
        err.contains("NoSuchBucket") || err.contains("not found"),
        "{err}"
    );
    // Trusted through the profile's ca_bundle.
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".aws")).unwrap();
    std::fs::write(
        home.path().join(".aws/config"),
        format!("[profile private]\nca_bundle = {ca}\nregion = us-east-1\n"),
    )
    .unwrap();
    let err = json(&[
        ("HOME", home.path().display().to_string()),
        ("AWS_PROFILE", "private".to_owned()),
    ]);
    assert!(!err.contains("TLS"), "{err}");
    assert!(
        err.contains("NoSuchBucket") || err.contains("not found"),
        "{err}"
    );
    let _ = server.kill();
    let _ = server.wait();
}
