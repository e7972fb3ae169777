//! A real browser for the web view's tests: Debian's chromium, headless,
//! driven through chromedriver over WebDriver (fantoccini), as a person's
//! browser would load the pages. Whatever the page meets that goes wrong
//! is read back two ways: the browser's own console log (chromedriver's
//! log of the `browser` type, every SEVERE entry) and the errors the page
//! keeps in `window.netawareErrors`.
//!
//! Chromium is started so that it opens no connection of its own (no
//! background networking, no component updates, no QUIC): it reaches only
//! the pages a test points it at.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// Chromium's binary, as Debian installs it.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Whether chromium and chromedriver are here (a skip outside CI, a
/// failure in it: scripts/test installs them).
pub fn available() -> bool {
    crate::require::have_tool("chromedriver") && crate::require::have_tool(CHROMIUM)
}

/// A headless chromium under chromedriver; both end when it is dropped.
#[derive(Debug)]
pub struct Browser {
    driver: Child,
    client: Option<Client>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and a headless chromium
    /// of `width` x `height` under it.
    pub async fn start(width: u32, height: u32) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new("chromedriver")
            .args([format!("--port={port}"), "--allowed-ips=127.0.0.1".into()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let profile = tempfile::tempdir().expect("a profile directory");
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-extensions".into(),
            "--hide-scrollbars".into(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let capabilities = json!({
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        let url = format!("http://127.0.0.1:{port}");
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let mut tries = 0;
        let client = loop {
            match ClientBuilder::new(connector.clone())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(err) if tries < 50 => {
                    tries += 1;
                    if tries == 50 {
                        panic!("chromedriver did not start a session: {err}");
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(err) => panic!("chromedriver did not start a session: {err}"),
            }
        };
        Browser {
            driver,
            client: Some(client),
            _profile: profile,
        }
    }

    /// The WebDriver client.
    pub fn client(&self) -> &Client {
        self.client.as_ref().expect("open until dropped")
    }

    /// Types `text` into the field `css` names, in place of what it held.
    pub async fn fill(&self, css: &str, text: &str) {
        let field = self.client().find(Locator::Css(css)).await.unwrap();
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    /// Clicks the element `css` names.
    pub async fn click(&self, css: &str) {
        let element = self.client().find(Locator::Css(css)).await.unwrap();
        element.click().await.unwrap();
    }

    /// Every SEVERE entry of the browser's console since the last call
    /// (chromedriver hands each entry out once).
    pub async fn console_errors(&self) -> Vec<String> {
        let entries = self
            .client()
            .issue_cmd(BrowserLog)
            .await
            .expect("chromedriver's browser log");
        entries
            .as_array()
            .into_iter()
            .flatten()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| entry["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// What the page kept in `window.netawareErrors`.
    pub async fn page_errors(&self) -> Vec<String> {
        let errors = self
            .client()
            .execute(
                "return window.netawareErrors || ['no error list: errors.js did not run'];",
                vec![],
            )
            .await
            .expect("the page answers a script");
        serde_json::from_value(errors).unwrap_or_default()
    }

    /// Runs `script` (a function body that returns a value) until it
    /// returns something that is neither null nor false, for at most
    /// `limit`; its value, or a panic that says `what` never came.
    pub async fn wait_for(&self, what: &str, limit: Duration, script: &str) -> Value {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let value = self
                .client()
                .execute(script, vec![])
                .await
                .unwrap_or(Value::Null);
            if !value.is_null() && value != Value::Bool(false) {
                return value;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "waited {limit:?} for {what}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Ends the session (the browser closes) before chromedriver is
    /// stopped.
    pub async fn close(mut self) {
        if let Some(client) = self.client.take() {
            let _ = client.close().await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// chromedriver's log of the browser's console (`POST
/// /session/{id}/se/log`, which Selenium's clients use).
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/se/log",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(json!({"type": "browser"}).to_string()),
        )
    }
}
