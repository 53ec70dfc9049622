//! Request names: `<user>-` plus the five random characters the apiserver adds.

/// The longest prefix ozctl makes: with `-` and the apiserver's five characters the name stays
/// short enough to read, and well inside a DNS label (63).
pub const MAX_PREFIX: usize = 40;

/// The generateName prefix for a user's requests: the user name made into a DNS label, so
/// `Alice.Smith@example.com` gives `alice-smith`, and `system:serviceaccount:ci:deployer`
/// gives `system-serviceaccount-ci-deployer`. An e-mail address keeps only its local part.
/// A name with nothing usable gives `request`.
pub fn prefix_for(username: &str) -> String {
    let local = match username.split_once('@') {
        Some((local, _)) if !local.is_empty() => local,
        _ => username,
    };
    let mut label = String::new();
    for c in local.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            label.push(c);
        } else if !label.ends_with('-') {
            label.push('-');
        }
    }
    let mut label: String = label.trim_matches('-').chars().take(MAX_PREFIX).collect();
    while label.ends_with('-') {
        label.pop();
    }
    if label.is_empty() {
        "request".into()
    } else {
        label
    }
}

/// Checks a prefix given with `--request-name`: lower-case letters, digits and `-`, starting
/// with a letter, at most [`MAX_PREFIX`] characters.
pub fn check_prefix(prefix: &str) -> Result<(), String> {
    let valid = prefix.len() <= MAX_PREFIX
        && prefix.starts_with(|c: char| c.is_ascii_lowercase())
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "invalid --request-name {prefix:?}: use lower-case letters, digits and '-', starting with a letter, at most {MAX_PREFIX} characters (for example {:?})",
            prefix_for(prefix)
        ))
    }
}

/// The `generateName` for a prefix: the prefix and a `-`.
pub fn generate_name(prefix: &str) -> String {
    format!("{}-", prefix.trim_end_matches('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names_become_dns_labels() {
        assert_eq!(prefix_for("alice"), "alice");
        assert_eq!(prefix_for("Alice.Smith@example.com"), "alice-smith");
        assert_eq!(
            prefix_for("system:serviceaccount:ci:deployer"),
            "system-serviceaccount-ci-deployer"
        );
        assert_eq!(prefix_for("  Bob   O'Neil "), "bob-o-neil");
        assert_eq!(prefix_for("jürgen"), "j-rgen");
        assert_eq!(prefix_for("42"), "42");
        assert_eq!(prefix_for("@example.com"), "example-com");
    }

    #[test]
    fn nothing_usable_gives_a_fixed_word() {
        assert_eq!(prefix_for(""), "request");
        assert_eq!(prefix_for("::"), "request");
        assert_eq!(prefix_for("日本"), "request");
    }

    #[test]
    fn long_names_are_cut_without_a_trailing_dash() {
        let long = format!("{}-{}", "a".repeat(39), "b".repeat(30));
        let prefix = prefix_for(&long);
        assert_eq!(prefix, "a".repeat(39));
        assert!(prefix_for(&"x".repeat(100)).len() == MAX_PREFIX);
    }

    #[test]
    fn generated_names_end_in_one_dash() {
        assert_eq!(generate_name("alice"), "alice-");
        assert_eq!(generate_name("alice-"), "alice-");
    }

    #[test]
    fn explicit_prefixes_are_checked_not_rewritten() {
        assert!(check_prefix("alice").is_ok());
        assert!(check_prefix("team-a-2").is_ok());
        let error = check_prefix("Alice Smith").unwrap_err();
        assert!(error.contains(r#"(for example "alice-smith")"#), "{error}");
        assert!(check_prefix("1abc").is_err());
        assert!(check_prefix(&"a".repeat(41)).is_err());
    }
}
