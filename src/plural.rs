//! How a count reads in messages: `1 release`, `2 releases`.

/// `n` and the word, singular for one: `1 release`, `0 releases`.
pub(crate) fn count(n: usize, singular: &str) -> String {
    if n == 1 {
        format!("1 {singular}")
    } else {
        format!("{n} {singular}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_agree_with_their_number() {
        assert_eq!(count(1, "release"), "1 release");
        assert_eq!(count(0, "release"), "0 releases");
        assert_eq!(count(13, "release"), "13 releases");
    }
}
