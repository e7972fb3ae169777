//! Names and label values that Kubernetes takes, made from zone names
//! that may not be: a label value is at most 63 characters of letters,
//! digits, `-`, `_` and `.`, starting and ending with a letter or digit;
//! an object name (DNS subdomain) is lowercase, at most 253 characters.
//! Where a name had to be shortened, a hash of the whole keeps it unique.

/// Longest label value.
pub const MAX_LABEL_VALUE: usize = 63;
/// Longest object name.
pub const MAX_OBJECT_NAME: usize = 253;

/// `text` as a label value: other characters become `-`, the ends are
/// trimmed to a letter or digit, and a value that changed or was over 63
/// characters is cut and ends with a hash of the whole.
pub fn label_value(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    fit(trim_ends(&cleaned), text, MAX_LABEL_VALUE)
}

/// `text` as an object name (a DNS subdomain of one label, so that no dot
/// lands beside a dash): lowercase letters, digits and `-`, other
/// characters `-`, ends a letter or digit, at most 253 characters (hashed
/// as above).
pub fn object_name(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = fit(trim_ends(&cleaned), text, MAX_OBJECT_NAME);
    if name.is_empty() { "x".into() } else { name }
}

fn trim_ends(text: &str) -> &str {
    text.trim_matches(|c: char| !c.is_ascii_alphanumeric())
}

/// `cleaned` when it is `original` and fits in `max`; else its start and a
/// hash of `original`, so that two texts cleaned alike stay apart.
fn fit(cleaned: &str, original: &str, max: usize) -> String {
    if cleaned.len() <= max && cleaned == original {
        return cleaned.to_owned();
    }
    let hash = format!("{:08x}", fnv1a(original) as u32);
    let room = max - hash.len() - 1;
    let start = trim_ends(&cleaned[..cleaned.len().min(room)]);
    if start.is_empty() {
        hash
    } else {
        format!("{start}-{hash}")
    }
}

/// FNV-1a: stable across builds and platforms, unlike the standard hasher.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_label_value(value: &str) -> bool {
        value.len() <= MAX_LABEL_VALUE
            && (value.is_empty()
                || (value.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && value.ends_with(|c: char| c.is_ascii_alphanumeric())
                    && value
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))))
    }

    #[test]
    fn valid_values_stay_as_they_are() {
        assert_eq!(label_value("us-east-1a-2"), "us-east-1a-2");
        assert_eq!(object_name("block-us-east-1a-2"), "block-us-east-1a-2");
    }

    #[test]
    fn anything_else_becomes_valid_and_distinct() {
        for text in ["Zone A/1", "_x_", "é", "", &"z".repeat(300), "a:b"] {
            let value = label_value(text);
            assert!(is_label_value(&value), "{text:?} -> {value:?}");
            let name = object_name(text);
            assert!(
                !name.is_empty()
                    && name.len() <= MAX_OBJECT_NAME
                    && name == name.to_lowercase()
                    && name.starts_with(|c: char| c.is_ascii_alphanumeric()),
                "{text:?} -> {name:?}"
            );
        }
        let long = |c: &str| format!("{}{c}", "z".repeat(70));
        assert_ne!(label_value(&long("1")), label_value(&long("2")));
        assert_ne!(label_value("zone a"), label_value("zone/a"));
    }
}
