//! What a run has to tell its caller (notes, warnings), gathered as it goes: the libraries
//! print nothing. Shared by the platform crates' runtimes; plain data behind a lock.

use std::sync::{Arc, Mutex};

/// A caller's hook handed each note as it comes.
pub type NoteHook = Arc<dyn Fn(&str) + Send + Sync>;

/// What a run has to tell its caller (notes, warnings), gathered as it goes: the library
/// prints nothing. Each line is a sentence without the `paddock: ` prefix a CLI adds.
#[derive(Clone, Default)]
pub struct Notes {
    lines: Arc<Mutex<Vec<String>>>,
    /// Handed each line as it comes, when the caller wants them at once (a CLI printing
    /// them before the task's own output).
    echo: Option<NoteHook>,
}

impl std::fmt::Debug for Notes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notes").field("lines", &self.lines).finish_non_exhaustive()
    }
}

impl Notes {
    /// Notes that also hand each line to `echo` as it comes.
    pub fn echoing(echo: NoteHook) -> Notes {
        Notes { lines: Arc::default(), echo: Some(echo) }
    }

    /// Adds a line.
    pub fn push(&self, line: impl Into<String>) {
        let line = line.into();
        if let Some(echo) = &self.echo {
            echo(&line);
        }
        if let Ok(mut lines) = self.lines.lock() {
            lines.push(line);
        }
    }

    /// The lines gathered so far, leaving none.
    pub fn take(&self) -> Vec<String> {
        self.lines.lock().map(|mut l| std::mem::take(&mut *l)).unwrap_or_default()
    }

    /// Adds lines.
    pub fn extend(&self, lines: impl IntoIterator<Item = String>) {
        for line in lines {
            self.push(line);
        }
    }

    /// The lines gathered so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_note_is_echoed_as_it_comes_and_kept_until_taken() {
        let echoed = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&echoed);
        let notes =
            Notes::echoing(Arc::new(move |l: &str| sink.lock().unwrap().push(l.to_owned())));
        let clone = notes.clone();
        notes.push("first");
        clone.extend(["second".to_owned()]);
        assert_eq!(notes.lines(), ["first", "second"], "clones share their lines");
        assert_eq!(*echoed.lock().unwrap(), ["first", "second"]);
        assert_eq!(clone.take(), ["first", "second"]);
        assert!(notes.lines().is_empty());
        let quiet = Notes::default();
        quiet.push("kept");
        assert_eq!(quiet.take(), ["kept"]);
    }
}
