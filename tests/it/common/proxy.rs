//! A small HTTP proxy the tests own, between the S3 client and the server.
//! Each request gets its own upstream connection (`Connection: close`), so one
//! request can be altered, counted, answered or dropped on its own.
//!
//! Modes: pass (counting methods), strip `If-Match`/`If-None-Match`, forward a
//! request and drop its answer (a lost answer), black-hole (a partition), and a
//! non-atomic service (check with a HEAD, pause, unconditional write).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward everything (methods are always counted).
    Pass,
    /// Remove If-Match / If-None-Match from every request.
    StripConditional,
    /// Accept connections, read requests, never answer.
    BlackHole,
    /// A non-atomic service: a PUT or DELETE with `If-Match` / `If-None-Match`
    /// is judged by the proxy from a HEAD of the key (412, or 404 for
    /// `If-Match` on an absent key), then, after [`NON_ATOMIC_PAUSE`],
    /// forwarded without the header. Each request alone is answered as S3
    /// would; concurrent ones all pass the check.
    NonAtomic,
}

/// The pause between the check and the write in [`Mode::NonAtomic`].
pub const NON_ATOMIC_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

#[derive(Default)]
struct State {
    mode: Option<Mode>,
    /// Drop the answers of the next N requests with this method (forwarded first).
    drop_next: Option<(String, usize)>,
    /// Hold back the answers of the next N requests with this method and path
    /// suffix for this long (forwarded first: the write lands, its answer is late).
    delay_next: Option<(String, String, usize, std::time::Duration)>,
    /// Only those whose path ends with this.
    drop_suffix: Option<String>,
    counts: BTreeMap<String, usize>,
    /// Black-hole only requests with this method whose path ends with this suffix.
    hang: Option<(String, String)>,
    /// Answer requests with this method and path suffix with this status, unforwarded.
    fail: Option<(String, String, u16)>,
    /// Answer every request carrying If-Match / If-None-Match with this status,
    /// unforwarded (a service that does not support conditional requests).
    fail_conditional: Option<u16>,
    /// Strip If-Match / If-None-Match only from requests whose path contains this.
    strip_under: Option<String>,
    /// Strip If-Match / If-None-Match from the n-th request (counting from 1)
    /// with this method whose path ends with this suffix: a service that lets
    /// one conditional write through whatever its precondition (MinIO without
    /// read quorum, its issue 21603).
    strip_nth: Option<(String, String, usize)>,
    /// Requests counted by `strip_nth` so far.
    strip_counted: usize,
    /// A PUT with `If-Match` on an absent key is forwarded without the header
    /// (it creates the object), every other request as it is: MinIO's issue
    /// 21526.
    if_match_absent_creates: bool,
    /// Answer every n-th GET with `503 SlowDown`, unforwarded.
    slow_down_every: Option<usize>,
    /// GETs seen while `slow_down_every` is set, and how many were slowed down.
    gets: usize,
    slowed: usize,
    /// Answer every ListObjectsV2 itself, with truncated pages whose
    /// continuation tokens misbehave this way.
    list_loop: Option<ListLoop>,
    /// ListObjectsV2 requests answered by `list_loop`.
    lists: usize,
    /// Forward every listing (ListObjectsV2, ListObjectVersions) from its
    /// first page and answer it truncated, with a fresh continuation token
    /// (or version marker) each time: a listing that never ends.
    endless: bool,
    /// Hold back each answer of an endless listing this long.
    endless_delay: std::time::Duration,
    /// Listing requests answered by `endless`.
    endless_pages: usize,
    /// Replace the `Date` header of every forwarded answer with this value.
    date: Option<String>,
    /// Remove every `<LastModified>` element from the answers to
    /// ListObjectVersions (a service that does not say when a version was written).
    strip_version_times: bool,
    /// Remove `max-keys` from ListObjectVersions requests (a service that
    /// ignores it and answers whole pages; moto does not check signatures).
    ignore_max_keys: bool,
    /// Rewrite the answers to PUTs: drop their ETag header.
    strip_put_etag: bool,
    /// Only those whose path ends with this.
    strip_suffix: Option<String>,
    /// Rewrite the ETag header of every answer to this value.
    etag: Option<String>,
    /// Write this body at the path of the next forwarded PUT, straight to the
    /// server and unconditionally, after that PUT landed and before its answer
    /// goes back (an intruder right behind a holder's write).
    intruder: Option<Intruder>,
}

/// A store straight to the server, and the body it writes.
pub type Intruder = (Arc<dyn leasectl::store::ObjectStore>, Vec<u8>);

/// How a fake listing's continuation tokens misbehave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListLoop {
    /// A, B, A, B, …: every page truncated, the tokens going round.
    Cycle,
    /// A, then A again: the page asked for with A gives A back.
    RepeatAtOnce,
}

#[derive(Clone)]
pub struct Proxy {
    pub port: u16,
    state: Arc<Mutex<State>>,
}

impl Proxy {
    /// Starts a proxy to `upstream_port` on the current tokio runtime.
    pub async fn start(upstream_port: u16, mode: Mode) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            mode: Some(mode),
            ..State::default()
        }));
        let st = state.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let st = st.clone();
                tokio::spawn(async move {
                    let _ = handle(client, upstream_port, st).await;
                });
            }
        });
        Self { port, state }
    }

    /// Forwards the next `n` requests with `method` whose path ends with
    /// `suffix`, and drops their answers (the writes land; the client never
    /// hears back).
    pub fn drop_next_answers_of(&self, method: &str, suffix: &str, n: usize) {
        let mut s = self.state.lock().unwrap();
        s.drop_next = Some((method.to_owned(), n));
        s.drop_suffix = Some(suffix.to_owned());
    }

    /// Forwards the next `n` requests with `method` whose path ends with
    /// `suffix` at once, and holds their answers back for `delay` (the writes
    /// land; the client hears of them late).
    pub fn delay_next_answers_of(
        &self,
        method: &str,
        suffix: &str,
        n: usize,
        delay: std::time::Duration,
    ) {
        let mut s = self.state.lock().unwrap();
        s.delay_next = Some((method.to_owned(), suffix.to_owned(), n, delay));
    }

    /// Every answer's ETag header becomes `value` (e.g. `""`, a service whose
    /// ETags are empty).
    pub fn rewrite_etags(&self, value: &str) {
        self.state.lock().unwrap().etag = Some(value.to_owned());
    }

    /// Answers to PUTs lose their ETag header (a service or a middlebox that
    /// does not return one); with `intruder`, that body is written at the next
    /// PUT's path right after it landed, before its answer is returned.
    pub fn strip_put_etags(&self, intruder: Option<Intruder>) {
        let mut s = self.state.lock().unwrap();
        s.strip_put_etag = true;
        s.strip_suffix = None;
        s.intruder = intruder;
    }

    /// [`Proxy::strip_put_etags`] for PUTs whose path ends with `suffix`
    /// only (a LEASE, not the probe's scratch keys).
    pub fn strip_put_etags_of(&self, suffix: &str, intruder: Option<Intruder>) {
        let mut s = self.state.lock().unwrap();
        s.strip_put_etag = true;
        s.strip_suffix = Some(suffix.to_owned());
        s.intruder = intruder;
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn set_mode(&self, mode: Mode) {
        self.state.lock().unwrap().mode = Some(mode);
    }

    /// Forward the next `n` requests with `method` but drop their answers.
    pub fn drop_next_answers(&self, method: &str, n: usize) {
        let mut s = self.state.lock().unwrap();
        s.drop_next = Some((method.to_owned(), n));
        s.drop_suffix = None;
    }

    /// Answer nothing to `method` requests whose path ends with `suffix` (others pass).
    pub fn hang_requests(&self, method: &str, suffix: &str) {
        self.state.lock().unwrap().hang = Some((method.to_owned(), suffix.to_owned()));
    }

    /// Answer `method` requests whose path ends with `suffix` with `status`
    /// (an S3-style XML error) without forwarding them.
    pub fn fail_requests(&self, method: &str, suffix: &str, status: u16) {
        self.state.lock().unwrap().fail = Some((method.to_owned(), suffix.to_owned(), status));
    }

    /// Answer every request with an `If-Match` or `If-None-Match` header with `status`.
    pub fn fail_conditional(&self, status: u16) {
        self.state.lock().unwrap().fail_conditional = Some(status);
    }

    /// Remove `If-Match` / `If-None-Match` only from requests whose path contains `part`
    /// (a service that mis-implements them for some keys).
    pub fn strip_conditional_under(&self, part: &str) {
        self.state.lock().unwrap().strip_under = Some(part.to_owned());
    }

    /// Strip `If-Match` / `If-None-Match` from the `n`-th request (from 1)
    /// with `method` whose path ends with `suffix`, counted from now: that one
    /// write is carried out whatever its precondition.
    pub fn strip_conditional_nth(&self, method: &str, suffix: &str, n: usize) {
        let mut s = self.state.lock().unwrap();
        s.strip_nth = Some((method.to_owned(), suffix.to_owned(), n));
        s.strip_counted = 0;
    }

    /// A PUT with `If-Match` on an absent key creates it (the header is
    /// dropped when a HEAD finds the key absent); everything else is honoured.
    pub fn if_match_on_absent_creates(&self) {
        self.state.lock().unwrap().if_match_absent_creates = true;
    }

    /// Answer every `n`-th GET with `503 SlowDown` (S3's request-rate limit)
    /// without forwarding it.
    pub fn slow_down_every(&self, n: usize) {
        self.state.lock().unwrap().slow_down_every = Some(n.max(1));
    }

    /// GETs answered `503 SlowDown` so far.
    pub fn slowed_down(&self) -> usize {
        self.state.lock().unwrap().slowed
    }

    /// Answer every ListObjectsV2 itself (unforwarded) with one common prefix
    /// per page, every page truncated, the continuation tokens misbehaving as
    /// `how` says.
    pub fn loop_listings(&self, how: ListLoop) {
        self.state.lock().unwrap().list_loop = Some(how);
    }

    /// Every listing, of objects or of versions, never ends: each is
    /// forwarded as a request for its first page, and the answer rewritten
    /// to say it is truncated, with a continuation token (or version-id
    /// marker) never given before, after `delay`. The service's real entries
    /// come back on every page.
    pub fn endless_listings(&self, delay: std::time::Duration) {
        let mut s = self.state.lock().unwrap();
        s.endless = true;
        s.endless_delay = delay;
    }

    /// Listing pages answered by [`Proxy::endless_listings`].
    pub fn endless_pages(&self) -> usize {
        self.state.lock().unwrap().endless_pages
    }

    /// ListObjectsV2 requests answered by [`Proxy::loop_listings`].
    pub fn looped_lists(&self) -> usize {
        self.state.lock().unwrap().lists
    }

    /// Answers to ListObjectVersions (`GET /bucket?versions…`) lose every
    /// `<LastModified>` element: versions and delete markers listed without
    /// the time they were written. Other answers (a version's GET and its
    /// `Last-Modified` header) pass untouched.
    pub fn strip_version_times(&self) {
        self.state.lock().unwrap().strip_version_times = true;
    }

    /// ListObjectVersions requests lose their `max-keys` parameter before
    /// they are forwarded: a service that answers a whole page whatever the
    /// client asked (moto only: the signature no longer matches the query).
    pub fn ignore_max_keys(&self) {
        self.state.lock().unwrap().ignore_max_keys = true;
    }

    /// Send every forwarded answer with this `Date` header instead of the server's.
    pub fn rewrite_date(&self, value: &str) {
        self.state.lock().unwrap().date = Some(value.to_owned());
    }

    /// Back to forwarding everything: no hang, no failure, no dropped answer.
    pub fn clear_faults(&self) {
        let mut s = self.state.lock().unwrap();
        s.hang = None;
        s.fail = None;
        s.fail_conditional = None;
        s.drop_next = None;
        s.drop_suffix = None;
        s.strip_put_etag = false;
        s.strip_suffix = None;
        s.intruder = None;
        s.slow_down_every = None;
        s.mode = Some(Mode::Pass);
    }

    /// How many of the answers [`Proxy::delay_next_answers_of`] asked to
    /// hold back are still to come (0: every one of those requests arrived).
    pub fn delays_pending(&self) -> usize {
        self.state
            .lock()
            .unwrap()
            .delay_next
            .as_ref()
            .map_or(0, |d| d.2)
    }

    /// Requests seen, by method.
    pub fn counts(&self) -> BTreeMap<String, usize> {
        self.state.lock().unwrap().counts.clone()
    }

    /// Requests seen that can change state (PUT, POST, DELETE, PATCH).
    pub fn writes(&self) -> usize {
        let c = self.counts();
        ["PUT", "POST", "DELETE", "PATCH"]
            .iter()
            .map(|m| c.get(*m).copied().unwrap_or(0))
            .sum()
    }
}

async fn handle(
    mut client: TcpStream,
    upstream_port: u16,
    state: Arc<Mutex<State>>,
) -> std::io::Result<()> {
    // Read the request head.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let rest = buf[head_end..].to_vec();
    let method = head.split(' ').next().unwrap_or("").to_owned();
    let path = head
        .split(' ')
        .nth(1)
        .unwrap_or("")
        .split('?')
        .next()
        .unwrap_or("")
        .to_owned();
    let (mut mode, drop_answer, mut fail, delay) = {
        let mut s = state.lock().unwrap();
        *s.counts.entry(method.clone()).or_default() += 1;
        let mut drop_answer = false;
        let mut delay = None;
        if let Some((m, suffix, n, d)) = &mut s.delay_next {
            if *m == method && *n > 0 && path.ends_with(suffix.as_str()) {
                *n -= 1;
                delay = Some(*d);
            }
        }
        let suffix_ok = s
            .drop_suffix
            .as_ref()
            .is_none_or(|x| path.ends_with(x.as_str()));
        if let Some((m, n)) = &mut s.drop_next {
            if *m == method && *n > 0 && suffix_ok {
                *n -= 1;
                drop_answer = true;
            }
        }
        let hang = s
            .hang
            .as_ref()
            .is_some_and(|(m, suffix)| *m == method && path.ends_with(suffix.as_str()));
        let nth = match s.strip_nth.clone() {
            Some((m, suffix, n)) if m == method && path.ends_with(suffix.as_str()) => {
                s.strip_counted += 1;
                s.strip_counted == n
            }
            _ => false,
        };
        let mode = if hang {
            Mode::BlackHole
        } else if nth
            || s.strip_under
                .as_ref()
                .is_some_and(|p| path.contains(p.as_str()))
        {
            Mode::StripConditional
        } else {
            s.mode.unwrap_or(Mode::Pass)
        };
        let mut slow = false;
        if let Some(n) = s.slow_down_every.filter(|_| method == "GET") {
            s.gets += 1;
            if s.gets.is_multiple_of(n) {
                s.slowed += 1;
                slow = true;
            }
        }
        let fail = slow
            .then_some(503)
            .or_else(|| {
                s.fail
                    .as_ref()
                    .filter(|(m, suffix, _)| *m == method && path.ends_with(suffix.as_str()))
                    .map(|f| f.2)
            })
            .or_else(|| {
                let conditional = head.lines().any(|l| {
                    let l = l.to_ascii_lowercase();
                    l.starts_with("if-match:") || l.starts_with("if-none-match:")
                });
                s.fail_conditional.filter(|_| conditional)
            });
        (mode, drop_answer, fail.map(|f| (f, slow)), delay)
    };
    // If-Match on an absent key creates it (MinIO's issue 21526).
    let absent_creates = state.lock().unwrap().if_match_absent_creates;
    if absent_creates
        && method == "PUT"
        && head
            .lines()
            .any(|l| l.to_ascii_lowercase().starts_with("if-match:"))
        && head_etag(upstream_port, &path).await?.is_none()
    {
        mode = Mode::StripConditional;
    }
    // The error code of an answer the non-atomic emulation gives itself.
    let mut judged: Option<&str> = None;
    if mode == Mode::NonAtomic && fail.is_none() {
        mode = Mode::StripConditional;
        let header = |name: &str| {
            head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| v.trim().trim_matches('"').to_owned())
            })
        };
        let (inm, im) = (header("if-none-match"), header("if-match"));
        if (method == "PUT" || method == "DELETE") && (inm.is_some() || im.is_some()) {
            let current = head_etag(upstream_port, &path).await?;
            let refuse = match (&inm, &im, &current) {
                (Some(_), _, Some(_)) => Some((412, "PreconditionFailed")),
                (_, Some(_), None) => Some((404, "NoSuchKey")),
                (_, Some(want), Some(have)) if want != have => Some((412, "PreconditionFailed")),
                _ => None,
            };
            match refuse {
                Some((status, code)) => {
                    fail = Some((status, false));
                    judged = Some(code);
                }
                None => tokio::time::sleep(NON_ATOMIC_PAUSE).await,
            }
        }
    }
    if let Some((status, slow)) = fail {
        // Read the whole request body first, so the answer is not a reset.
        let want = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())
                    .flatten()
            })
            .unwrap_or(0);
        let mut got = rest.len();
        while got < want {
            let n = client.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            got += n;
        }
        let body = if let Some(code) = judged {
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>judged by the non-atomic proxy</Message></Error>"
            )
        } else if slow {
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>".to_owned()
        } else {
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>InjectedFault</Code><Message>injected {status}</Message></Error>"
            )
        };
        answer_xml(&mut client, &format!("{status} Injected"), &body).await;
        return Ok(());
    }
    let target = head.split(' ').nth(1).unwrap_or("").to_owned();
    let strip_times = {
        let s = state.lock().unwrap();
        s.strip_version_times
            && method == "GET"
            && target
                .split(['?', '&'])
                .skip(1)
                .any(|kv| kv == "versions" || kv.starts_with("versions="))
    };
    let endless = {
        let mut s = state.lock().unwrap();
        let listing = method == "GET" && is_listing(&target);
        if s.endless && listing {
            s.endless_pages += 1;
            Some((s.endless_pages, s.endless_delay))
        } else {
            None
        }
    };
    if let Some((page, delay)) = endless {
        return endless_page(client, upstream_port, &head, &target, page, delay).await;
    }
    let (list_loop, date, strip_etag, intruder, etag_value) = {
        let mut s = state.lock().unwrap();
        let strip_etag = s.strip_put_etag
            && method == "PUT"
            && s.strip_suffix
                .as_ref()
                .is_none_or(|x| path.ends_with(x.as_str()));
        let intruder = if strip_etag { s.intruder.take() } else { None };
        let looped = s
            .list_loop
            .filter(|_| method == "GET" && target.contains("list-type=2"));
        if looped.is_some() {
            s.lists += 1;
        }
        (looped, s.date.clone(), strip_etag, intruder, s.etag.clone())
    };
    if let Some(how) = list_loop {
        let token = target
            .split(['?', '&'])
            .find_map(|kv| kv.strip_prefix("continuation-token="))
            .map(str::to_owned);
        let next = match (how, token.as_deref()) {
            (_, None) => "A",
            (ListLoop::Cycle, Some("A")) => "B",
            (ListLoop::Cycle, Some(_)) => "A",
            (ListLoop::RepeatAtOnce, Some(_)) => "A",
        };
        let page = token.as_deref().unwrap_or("first");
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
             <ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\
             <Name>b</Name><Prefix></Prefix><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys>\
             <Delimiter>/</Delimiter><EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>\
             {}<NextContinuationToken>{next}</NextContinuationToken>\
             <CommonPrefixes><Prefix>page-{page}/</Prefix></CommonPrefixes></ListBucketResult>",
            token
                .as_deref()
                .map(|t| format!("<ContinuationToken>{t}</ContinuationToken>"))
                .unwrap_or_default()
        );
        answer_xml(&mut client, "200 OK", &body).await;
        return Ok(());
    }
    if mode == Mode::BlackHole {
        // Swallow everything, answer nothing, until the client gives up.
        while client.read(&mut chunk).await? > 0 {}
        return Ok(());
    }
    let ignore_max_keys = state.lock().unwrap().ignore_max_keys;
    let mut out = String::new();
    for (i, line) in head.split("\r\n").enumerate() {
        if line.is_empty() {
            continue;
        }
        if i == 0 && ignore_max_keys && line.contains("versions") {
            // GET /b?versions&max-keys=1&prefix=… HTTP/1.1, without max-keys.
            let (start, rest) = line.split_once('?').unwrap_or((line, ""));
            let (query, version) = rest.rsplit_once(' ').unwrap_or((rest, ""));
            let kept: Vec<&str> = query
                .split('&')
                .filter(|kv| !kv.starts_with("max-keys="))
                .collect();
            out.push_str(&format!("{start}?{} {version}\r\n", kept.join("&")));
            continue;
        }
        let lower = line.to_ascii_lowercase();
        if i > 0 && lower.starts_with("connection:") {
            continue;
        }
        if mode == Mode::StripConditional
            && (lower.starts_with("if-match:") || lower.starts_with("if-none-match:"))
        {
            continue;
        }
        out.push_str(&format!("{line}\r\n"));
    }
    let mut upstream = send_head(upstream_port, out).await?;
    upstream.write_all(&rest).await?;
    let (mut cr, mut cw) = client.into_split();
    let (mut ur, mut uw) = upstream.into_split();
    let up = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut cr, &mut uw).await;
    });
    if let Some(d) = delay {
        // The whole answer first (the write has landed), then the wait.
        let answer = read_all(&mut ur).await;
        tokio::time::sleep(d).await;
        let _ = cw.write_all(&answer).await;
        let _ = cw.shutdown().await;
    } else if drop_answer {
        let mut sink = Vec::new();
        let _ = ur.read_to_end(&mut sink).await;
        drop(cw); // close without answering: the answer is lost
    } else if let Some(value) = etag_value {
        // The whole answer (the upstream closes after it), its ETag replaced.
        let answer = read_all(&mut ur).await;
        let rewritten = with_header(&answer, "etag", Some(&format!("ETag: {value}")));
        let _ = cw.write_all(&rewritten).await;
        let _ = cw.shutdown().await;
    } else if strip_etag {
        // The whole answer, its ETag removed; the intruder's write lands
        // before it goes back.
        let answer = read_all(&mut ur).await;
        if let Some((store, body)) = intruder {
            // The key: the path without its leading `/bucket/` (path-style).
            let key = path
                .trim_start_matches('/')
                .split_once('/')
                .map_or("", |k| k.1)
                .to_owned();
            store
                .put(&key, body, leasectl::store::PutCondition::None)
                .await
                .expect("the intruder's write");
        }
        let _ = cw.write_all(&with_header(&answer, "etag", None)).await;
        let _ = cw.shutdown().await;
    } else if strip_times {
        // The whole answer, its LastModified elements removed and its
        // length set again.
        let answer = read_all(&mut ur).await;
        let _ = cw
            .write_all(&without_element(&answer, "LastModified"))
            .await;
        let _ = cw.shutdown().await;
    } else if let Some(date) = date {
        // The whole answer, its Date replaced.
        let answer = read_all(&mut ur).await;
        let rewritten = with_header(&answer, "date", Some(&format!("Date: {date}")));
        let _ = cw.write_all(&rewritten).await;
        let _ = cw.shutdown().await;
    } else {
        let _ = tokio::io::copy(&mut ur, &mut cw).await;
        let _ = cw.shutdown().await;
    }
    up.abort();
    Ok(())
}

/// Whether a request target is a listing of objects or of versions.
fn is_listing(target: &str) -> bool {
    target.split_once('?').is_some_and(|(_, q)| {
        q.split('&')
            .any(|kv| kv == "list-type=2" || kv == "versions" || kv.starts_with("versions="))
    })
}

/// [`Proxy::endless_listings`]: forwards the listing in `head` as a request
/// for its first page (its continuation token and markers removed), then
/// answers with the service's page rewritten to be truncated, with a
/// token or marker made from `page` (never given before), after `delay`.
async fn endless_page(
    mut client: TcpStream,
    upstream_port: u16,
    head: &str,
    target: &str,
    page: usize,
    delay: std::time::Duration,
) -> std::io::Result<()> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let first: Vec<&str> = query
        .split('&')
        .filter(|kv| {
            ![
                "continuation-token=",
                "key-marker=",
                "version-id-marker=",
                "start-after=",
            ]
            .iter()
            .any(|p| kv.starts_with(p))
        })
        .collect();
    let first_target = format!("{path}?{}", first.join("&"));
    let mut out = String::new();
    for (i, line) in head.split("\r\n").enumerate() {
        if line.is_empty() {
            continue;
        }
        if i == 0 {
            let method = line.split(' ').next().unwrap_or("GET");
            out.push_str(&format!("{method} {first_target} HTTP/1.1\r\n"));
            continue;
        }
        if line.to_ascii_lowercase().starts_with("connection:") {
            continue;
        }
        out.push_str(&format!("{line}\r\n"));
    }
    let mut upstream = send_head(upstream_port, out).await?;
    let answer = read_all(&mut upstream).await;
    let end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(answer.len(), |i| i + 4);
    let body = String::from_utf8_lossy(&answer[end..]).into_owned();
    let mut body = drop_element(&body, "NextContinuationToken");
    for name in ["NextKeyMarker", "NextVersionIdMarker"] {
        body = drop_element(&body, name);
    }
    let body = body.replace(
        "<IsTruncated>false</IsTruncated>",
        "<IsTruncated>true</IsTruncated>",
    );
    let body = if let Some(i) = body.rfind("</ListVersionsResult>") {
        let key = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("prefix="))
            .unwrap_or("");
        let key = percent_decode(key);
        format!(
            "{}<NextKeyMarker>{key}</NextKeyMarker><NextVersionIdMarker>endless-{page}</NextVersionIdMarker>{}",
            &body[..i],
            &body[i..]
        )
    } else if let Some(i) = body.rfind("</ListBucketResult>") {
        format!(
            "{}<NextContinuationToken>endless-{page}</NextContinuationToken>{}",
            &body[..i],
            &body[i..]
        )
    } else {
        body
    };
    let head_bytes = with_header(
        &answer[..end],
        "content-length",
        Some(&format!("Content-Length: {}", body.len())),
    );
    let mut rewritten = head_bytes;
    rewritten.extend_from_slice(body.as_bytes());
    tokio::time::sleep(delay).await;
    let _ = client.write_all(&rewritten).await;
    let _ = client.shutdown().await;
    Ok(())
}

/// `xml` without its element `<name>…</name>` (the first one), if any.
fn drop_element(xml: &str, name: &str) -> String {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    match (xml.find(&open), xml.find(&close)) {
        (Some(a), Some(b)) if b > a => format!("{}{}", &xml[..a], &xml[b + close.len()..]),
        _ => xml.to_owned(),
    }
}

/// A query value's `%XX` escapes decoded (the listings' prefixes).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1..i + 3)) {
            (b'%', Some(hex)) => {
                match u8::from_str_radix(std::str::from_utf8(hex).unwrap_or("zz"), 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            (b, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The ETag of `path` upstream (quotes removed), from a HEAD with a made-up
/// signature (moto wants an Authorization header but does not check it);
/// `None` when absent.
const FAKE_AUTH: &str = "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request, \
     SignedHeaders=host, Signature=00";

async fn head_etag(upstream_port: u16, path: &str) -> std::io::Result<Option<String>> {
    let mut s = TcpStream::connect(("127.0.0.1", upstream_port)).await?;
    s.write_all(
        format!("HEAD {path} HTTP/1.1\r\nHost: 127.0.0.1:{upstream_port}\r\nAuthorization: {FAKE_AUTH}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    let text = String::from_utf8_lossy(&buf);
    let ok = text
        .lines()
        .next()
        .is_some_and(|l| l.split(' ').nth(1) == Some("200"));
    Ok(ok
        .then(|| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("etag")
                    .then(|| v.trim().trim_matches('"').to_owned())
            })
        })
        .flatten())
}

/// Answers the client `HTTP/1.1 STATUS` (`200 OK`) with the XML `body`, and
/// closes the connection.
async fn answer_xml(client: &mut TcpStream, status: &str, body: &str) {
    let answer = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(answer.as_bytes()).await;
    let _ = client.shutdown().await;
}

/// Connects to the upstream and sends it the request head `head` (its lines,
/// each ending in CRLF, without a `Connection` header) with `Connection: close`.
async fn send_head(upstream_port: u16, mut head: String) -> std::io::Result<TcpStream> {
    head.push_str("Connection: close\r\n\r\n");
    let mut upstream = TcpStream::connect(("127.0.0.1", upstream_port)).await?;
    upstream.write_all(head.as_bytes()).await?;
    Ok(upstream)
}

/// Everything the upstream sends until it closes (it answers one request).
async fn read_all(ur: &mut (impl tokio::io::AsyncRead + Unpin)) -> Vec<u8> {
    let mut answer = Vec::new();
    let _ = ur.read_to_end(&mut answer).await;
    answer
}

/// The HTTP answer `answer` (with a `Content-Length`, not chunked) with
/// every `<name>…</name>` element of its body removed, its length set again.
fn without_element(answer: &[u8], name: &str) -> Vec<u8> {
    let end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(answer.len(), |i| i + 4);
    let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
    assert!(
        !head.contains("transfer-encoding: chunked"),
        "the proxy rewrites bodies with a Content-Length only: {head}"
    );
    let mut body = String::from_utf8_lossy(&answer[end..]).into_owned();
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    while let Some(a) = body.find(&open) {
        let Some(b) = body[a..].find(&close) else {
            break;
        };
        body.replace_range(a..a + b + close.len(), "");
    }
    let length = format!("Content-Length: {}", body.len());
    let mut out = with_header(&answer[..end], "content-length", Some(&length));
    out.extend_from_slice(body.as_bytes());
    out
}

/// `answer` with its header `name` (lower case) removed, and `line` (a whole
/// header line) added in its place when given.
fn with_header(answer: &[u8], name: &str, line: Option<&str>) -> Vec<u8> {
    let end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(answer.len());
    let head = String::from_utf8_lossy(&answer[..end]).into_owned();
    let prefix = format!("{name}:");
    let mut out: Vec<&str> = head
        .split("\r\n")
        .filter(|l| !l.to_ascii_lowercase().starts_with(&prefix))
        .collect();
    if let Some(l) = line {
        out.push(l);
    }
    let mut bytes = out.join("\r\n").into_bytes();
    bytes.extend_from_slice(&answer[end..]);
    bytes
}
