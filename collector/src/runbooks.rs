//! The runbooks the alerts link to (`runbook_url`): docs/runbooks.md,
//! compiled into the collector and served as one HTML page at /runbooks.
//!
//! Served by the collector rather than linked to a website so that an
//! alert's link answers inside a cluster with no way out, and with the
//! runbook of the version that raised it. Each heading gets the id GitHub
//! gives it, so the same fragment (`#netawarelossylink`) finds the section
//! on this page and in the repository's rendering of the file.

use std::sync::LazyLock;

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd, html};

/// The runbooks, as written.
const SOURCE: &str = include_str!("../../docs/runbooks.md");

/// The page, rendered once on first use.
pub fn page() -> &'static str {
    static PAGE: LazyLock<String> = LazyLock::new(|| render(SOURCE));
    &PAGE
}

/// `markdown` as a whole HTML page: each heading with its GitHub id, and
/// each link to another document as its text alone (the collector serves
/// only this one); links inside the page stay links.
fn render(markdown: &str) -> String {
    let events: Vec<Event<'_>> = Parser::new_ext(markdown, Options::ENABLE_TABLES).collect();
    let mut out = Vec::with_capacity(events.len());
    let mut in_dropped_link = false;
    for (i, event) in events.iter().enumerate() {
        match event {
            Event::Start(Tag::Heading {
                level,
                classes,
                attrs,
                ..
            }) => out.push(Event::Start(Tag::Heading {
                level: *level,
                id: Some(CowStr::from(slug(&heading_text(&events[i + 1..])))),
                classes: classes.clone(),
                attrs: attrs.clone(),
            })),
            Event::Start(Tag::Link { dest_url, .. }) if !dest_url.starts_with('#') => {
                in_dropped_link = true;
            }
            Event::End(TagEnd::Link) if in_dropped_link => in_dropped_link = false,
            other => out.push(other.clone()),
        }
    }
    let mut body = String::with_capacity(markdown.len() * 2);
    html::push_html(&mut body, out.into_iter());
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>netaware runbooks</title><style>\
         body{{font-family:sans-serif;max-width:52em;margin:2em auto;padding:0 1em;line-height:1.45}}\
         code{{background:#f0f0f0;padding:0 .2em}}</style></head>\n<body>\n{body}</body></html>\n"
    )
}

/// The text of the heading whose events start `events`, up to its end.
fn heading_text(events: &[Event<'_>]) -> String {
    events
        .iter()
        .take_while(|e| !matches!(e, Event::End(TagEnd::Heading(_))))
        .filter_map(|e| match e {
            Event::Text(text) | Event::Code(text) => Some(text.as_ref()),
            _ => None,
        })
        .collect()
}

/// The id GitHub gives a heading: lowercase, spaces as '-', every other
/// character but letters, digits, '-' and '_' dropped.
fn slug(text: &str) -> String {
    text.trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_get_github_ids_and_only_links_inside_the_page_stay() {
        let page = render(
            "# Title\n\n## Which probes run, and `what` each needs\n\n\
             See [faults](faults.md#x) and [above](#title).\n",
        );
        assert!(page.contains(r#"<h1 id="title">Title</h1>"#), "{page}");
        assert!(
            page.contains(r#"<h2 id="which-probes-run-and-what-each-needs">"#),
            "{page}"
        );
        assert!(
            page.contains("See faults and <a href=\"#title\">above</a>."),
            "{page}"
        );
        assert!(!page.contains("faults.md"), "{page}");
    }

    /// Every alert of the shipped rules links to a section of this page,
    /// and every section is some alert's.
    #[test]
    fn every_alert_links_to_its_own_section() {
        let rules: serde_yaml::Value = serde_yaml::from_str(include_str!(
            "../../deploy/components/monitoring/prometheus-rule.yaml"
        ))
        .unwrap();
        let mut alerts = Vec::new();
        for group in rules["spec"]["groups"].as_sequence().unwrap() {
            for rule in group["rules"].as_sequence().unwrap() {
                let name = rule["alert"].as_str().unwrap().to_owned();
                let url = rule["annotations"]["runbook_url"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{name} has no runbook_url"));
                let (base, fragment) = url.split_once('#').expect("a fragment");
                assert!(base.ends_with("/runbooks"), "{url}");
                assert_eq!(fragment, name.to_lowercase(), "{url}");
                alerts.push(fragment.to_owned());
            }
        }
        let page = page();
        for fragment in &alerts {
            assert!(
                page.contains(&format!("<h2 id=\"{fragment}\">")),
                "no section #{fragment}"
            );
        }
        let sections = page.matches("<h2 id=").count();
        assert_eq!(sections, alerts.len(), "a section for no alert");
    }
}
