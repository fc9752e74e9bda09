//! `srun --multi-prog` configuration files (cf. src/srun/multi_prog.c): one line per
//! set of ranks, `RANKS PROGRAM [ARGS...]`, where RANKS is `*` or a comma list of ranks
//! and `N-M` ranges; `#` starts a comment. In the program and arguments `%t` is the
//! task's rank and `%o` its offset within the line's ranks. Every rank of the step must
//! be covered, each once (a later line does not override an earlier one).

/// Parses `text` for a step of `ntasks` tasks into the command of each rank.
///
/// Errors: a description of the first problem (bad rank list, rank out of range, rank
/// given twice, rank missing, line without a program).
pub fn parse(text: &str, ntasks: u32) -> Result<Vec<Vec<String>>, String> {
    let mut out: Vec<Option<Vec<String>>> = vec![None; ntasks as usize];
    for (no, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let words = split_words(line);
        let Some((ranks, prog)) = words.split_first() else {
            continue;
        };
        if prog.is_empty() {
            return Err(format!("line {}: no program for ranks {ranks}", no + 1));
        }
        let list: Vec<u32> = if ranks == "*" {
            (0..ntasks).filter(|&r| out[r as usize].is_none()).collect()
        } else {
            parse_ranks(ranks).ok_or_else(|| format!("line {}: invalid ranks '{ranks}'", no + 1))?
        };
        for (offset, &r) in list.iter().enumerate() {
            let slot = out
                .get_mut(r as usize)
                .ok_or_else(|| format!("line {}: rank {r} is not in the step", no + 1))?;
            if slot.is_some() && ranks != "*" {
                return Err(format!("line {}: rank {r} given twice", no + 1));
            }
            let argv = prog
                .iter()
                .map(|w| {
                    w.replace("%t", &r.to_string())
                        .replace("%o", &offset.to_string())
                })
                .collect();
            *slot = Some(argv);
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(r, a)| a.ok_or_else(|| format!("no program for rank {r}")))
        .collect()
}

fn parse_ranks(s: &str) -> Option<Vec<u32>> {
    let mut v = Vec::new();
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if b < a {
                    return None;
                }
                v.extend(a..=b);
            }
            None => v.push(part.parse().ok()?),
        }
    }
    Some(v)
}

/// Splits on whitespace, keeping single- or double-quoted words together.
fn split_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in s.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                any = true;
            }
            None if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            None => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_offsets_and_wildcard() {
        let t = "# rank program\n0 echo zero\n1-2 echo task:%t:offset:%o\n";
        let p = parse(t, 3).unwrap();
        assert_eq!(p[0], ["echo", "zero"]);
        assert_eq!(p[1], ["echo", "task:1:offset:0"]);
        assert_eq!(p[2], ["echo", "task:2:offset:1"]);
        let p = parse("0 a\n* b %t\n", 3).unwrap();
        assert_eq!(p[0], ["a"]);
        assert_eq!(p[2], ["b", "2"]);
        let p = parse("0,2 sh -c 'echo hi there'\n1 true\n", 3).unwrap();
        assert_eq!(p[2], ["sh", "-c", "echo hi there"]);
    }

    #[test]
    fn bad_files_are_refused() {
        assert!(
            parse("0 echo only-zero\n", 2)
                .unwrap_err()
                .contains("rank 1")
        );
        assert!(parse("0 a\n0 b\n", 1).unwrap_err().contains("twice"));
        assert!(parse("5 a\n", 2).is_err());
        assert!(parse("x a\n", 1).is_err());
        assert!(parse("3-1 a\n", 4).is_err());
    }
}
