//! The web view in a real browser (Debian's headless chromium under
//! chromedriver), against the collector on the lab's default topology
//! (a3 losing 10% each way): every page loads without an error in the
//! browser's console or the page's own list; the zone table has the
//! lab's three zones and the worst pairs start with a3; the heat map of
//! every zone by loss paints every pair of a3 red and a clean pair green,
//! and hovering a cell shows the pair's figures; the faults page names
//! a3's NIC; the job form answers with a node that is not a3, and says
//! why a3 may not take a worker.
//!
//! Each page's screenshot is written to target/web-view/; with
//! `NETAWARE_SCREENSHOTS=DIR` (docs/web-view for the README) there too.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use netaware::json::FaultsJson;
use netaware::lab_system::{LabSystem, METRICS_PORT};
use netaware_lab::root_or_skip;
use netaware_testkit::browser::{self, Browser};
use serde_json::Value;

use crate::faults::start_with_quick_rounds;
use crate::measurement::default_with_a3_clearly_lossy;

/// The heat map's canvas, its node names and where its cells are, for the
/// scripts that read it.
const MAP: &str = "const c = document.querySelector('main canvas'); \
                   const names = JSON.parse(c.dataset.names); \
                   const cell = +c.dataset.cell, label = +c.dataset.label;";

/// How long a page may take to show what it reads.
const PAGE: Duration = Duration::from_secs(15);

#[test]
fn the_web_view_shows_the_lossy_host_names_its_fault_and_places_a_job() {
    if !root_or_skip("web view lab") || !browser::available() {
        return;
    }
    let _one = netaware_testkit::one_lab_at_a_time();
    let system = start_with_quick_rounds(default_with_a3_clearly_lossy(), &[]);
    wait_for_a3s_fault(&system);
    let address = system.lab().open_access("control").unwrap();
    let base = format!("http://{address}:{METRICS_PORT}/ui/");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let browser = Browser::start(1400, 1000).await;
        let pages = Pages {
            browser: &browser,
            base: &base,
        };
        pages.overview().await;
        pages.heat_map().await;
        pages.faults().await;
        pages.blocks().await;
        pages.job().await;
        assert_eq!(browser.page_errors().await, Vec::<String>::new());
        assert_eq!(browser.console_errors().await, Vec::<String>::new());
        browser.close().await;
    });
}

/// Probes every pair of a3 has had before the pages are read. The heat
/// map paints a pair of a3 lossy from 3.75% up; a3 loses 10% each way, so
/// 19% of its round trips, and 100 probes read under 3.75% about once in
/// 600,000 (binomial; once in 37,000 runs over its 16 pairs). Seeing the
/// fault is not enough: the collector can name a3's NIC from its first
/// pairs while a pair whose prober started late holds one short window,
/// which at 8 probes reads no loss at all one time in five.
const A3_PAIR_PROBES: u64 = 100;

/// Waits until the collector names a3's NIC and every pair of a3 (both
/// ways, with each other host) has [`A3_PAIR_PROBES`] probes.
fn wait_for_a3s_fault(system: &LabSystem) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let others = system.lab().workers().count() - 1;
    loop {
        let faults: Option<FaultsJson> = system
            .ask(&["faults", "-o", "json"])
            .ok()
            .and_then(|json| serde_json::from_str(&json).ok());
        let named = faults.is_some_and(|f| {
            f.faults
                .iter()
                .any(|fault| fault.kind == "node" && fault.nodes == ["a3"])
        });
        let probed = system.matrix().map_or(0, |matrix| {
            matrix
                .pairs
                .iter()
                .filter(|p| (p.src == "a3") != (p.dst == "a3") && p.samples >= A3_PAIR_PROBES)
                .count()
        });
        if named && probed == 2 * others {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "in 120 s: a3's NIC named {named}, {probed} of a3's {} pairs with {A3_PAIR_PROBES} probes: {:?}",
            2 * others,
            system.ask(&["faults"])
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

struct Pages<'a> {
    browser: &'a Browser,
    base: &'a str,
}

impl Pages<'_> {
    async fn open(&self, route: &str) {
        let url = format!("{}{route}", self.base);
        self.browser.client().goto(&url).await.unwrap();
    }

    /// The text of the page's main part, once `script` says it is there.
    async fn shown(&self, what: &str, script: &str) -> String {
        self.browser.wait_for(what, PAGE, script).await;
        let text = self
            .browser
            .client()
            .execute("return document.getElementById('main').innerText;", vec![])
            .await
            .unwrap();
        text.as_str().unwrap_or_default().to_owned()
    }

    async fn screenshot(&self, name: &str) {
        let png = self.browser.client().screenshot().await.unwrap();
        let mut dirs = vec![PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("web-view")];
        if let Ok(dir) = std::env::var("NETAWARE_SCREENSHOTS") {
            dirs.push(PathBuf::from(dir));
        }
        for dir in dirs {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(format!("{name}.png")), &png).unwrap();
        }
    }

    async fn overview(&self) {
        self.open("#/").await;
        let text = self
            .shown(
                "the zone table and the worst pairs",
                "const t = document.querySelectorAll('main table'); \
                 return t.length >= 3 && t[2].tBodies[0].rows.length > 0;",
            )
            .await;
        for zone in ["zone-a", "zone-b", "zone-c"] {
            assert!(text.contains(zone), "{zone} missing from:\n{text}");
        }
        let worst = self
            .browser
            .client()
            .execute(
                "return document.querySelectorAll('main table')[2].tBodies[0].rows[0].innerText;",
                vec![],
            )
            .await
            .unwrap();
        assert!(
            worst.as_str().unwrap_or_default().contains("a3"),
            "the worst pair is not a3's: {worst}\n{text}"
        );
        self.screenshot("overview").await;
    }

    async fn heat_map(&self) {
        self.open("#/heatmap?metric=loss").await;
        self.browser
            .wait_for(
                "every zone's heat map by loss",
                PAGE,
                "const c = document.querySelector('main canvas'); \
                 return c && c.dataset.names.includes('a3');",
            )
            .await;
        // The colour at the centre of every cell, as the page painted it.
        let painted = self
            .browser
            .client()
            .execute(
                &format!("{MAP} \
                 const ctx = c.getContext('2d'); \
                 const at = (row, column) => Array.from(ctx.getImageData( \
                   label + column * cell + cell / 2, label + row * cell + cell / 2, 1, 1).data.slice(0, 3)); \
                 return {{names, cells: names.map((_, r) => names.map((_, k) => at(r, k)))}};"),
                vec![],
            )
            .await
            .unwrap();
        let names: Vec<String> = serde_json::from_value(painted["names"].clone()).unwrap();
        assert_eq!(names.len(), 9, "{names:?}");
        let a3 = names.iter().position(|n| n == "a3").unwrap();
        let rgb = |row: usize, column: usize| -> [u64; 3] {
            let cell = &painted["cells"][row][column];
            [0, 1, 2].map(|i| cell[i].as_u64().unwrap())
        };
        for other in (0..names.len()).filter(|&i| i != a3) {
            for (row, column) in [(other, a3), (a3, other)] {
                let [r, g, _] = rgb(row, column);
                assert!(
                    r >= 200 && g <= 120,
                    "{} -> {} is not painted lossy: {:?}",
                    names[row],
                    names[column],
                    rgb(row, column)
                );
            }
        }
        let clean: Vec<usize> = (0..names.len()).filter(|&i| i != a3).collect();
        let [r, g, _] = rgb(clean[0], clean[1]);
        assert!(
            g >= 150 && r <= 120,
            "{} -> {} is not painted clean: {:?}",
            names[clean[0]],
            names[clean[1]],
            rgb(clean[0], clean[1])
        );
        // Hovering a3's column shows the pair's figures.
        self.browser
            .client()
            .execute(
                &format!(
                    "{MAP} \
                 const box = c.getBoundingClientRect(); \
                 const row = names.indexOf(arguments[0]), column = names.indexOf('a3'); \
                 c.dispatchEvent(new MouseEvent('mousemove', {{bubbles: true, \
                   clientX: box.left + label + column * cell + cell / 2, \
                   clientY: box.top + label + row * cell + cell / 2}}));"
                ),
                vec![Value::from(names[clean[0]].clone())],
            )
            .await
            .unwrap();
        let tip = self
            .browser
            .wait_for(
                "the hovered pair's figures",
                PAGE,
                "const t = document.getElementById('tooltip'); \
                 return t && t.innerText.includes('loss ') && t.innerText;",
            )
            .await;
        let tip = tip.as_str().unwrap_or_default();
        assert!(tip.contains("→ a3") && tip.contains("RTT median"), "{tip}");
        self.screenshot("heatmap").await;
    }

    async fn faults(&self) {
        self.open("#/faults").await;
        let text = self
            .shown(
                "the faults table",
                "return document.querySelector('main table') !== null;",
            )
            .await;
        let a3 = text
            .lines()
            .find(|line| line.starts_with("node") && line.contains("a3"))
            .unwrap_or_else(|| panic!("a3's NIC not named:\n{text}"));
        assert!(a3.contains("loses"), "{a3}");
        self.screenshot("faults").await;
    }

    async fn blocks(&self) {
        self.open("#/blocks").await;
        let text = self
            .shown(
                "the measured blocks",
                "return document.querySelectorAll('main .block').length > 0;",
            )
            .await;
        assert!(
            text.contains("zone-a") && text.contains("block 1"),
            "{text}"
        );
        self.screenshot("blocks").await;
    }

    async fn job(&self) {
        self.open("#/job").await;
        self.browser
            .wait_for(
                "the job form",
                PAGE,
                "return document.querySelector('form.job') !== null;",
            )
            .await;
        self.browser.fill("form.job input[name=size]", "3").await;
        self.browser.click("form.job button").await;
        let next = self
            .browser
            .wait_for(
                "the answer's next worker",
                PAGE,
                "const s = document.querySelector('.next-worker strong'); return s && s.innerText;",
            )
            .await;
        let next = next.as_str().unwrap_or_default().to_owned();
        assert!(
            next.len() == 2 && next != "a3" && !next.starts_with("nowhere"),
            "next worker: {next}"
        );
        let text = self.shown("the candidates", "return true;").await;
        let a3 = text
            .lines()
            .find(|line| line.starts_with("a3"))
            .unwrap_or_else(|| panic!("a3 not among the candidates:\n{text}"));
        assert!(a3.contains("not there"), "{a3}");
        self.screenshot("job").await;
    }
}
