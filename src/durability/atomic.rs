//! Replacing a file atomically: the one routine by which the node writes a whole file
//! (`node.state` when its format or inode changes, the snapshot, the cluster map in
//! `--dir`, ACL SAVE's aclfile). A crash at any point leaves the old file or the new
//! one, never a part of either.

use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// What every temporary file's name carries after the replaced file's name
/// (`.NAME.tmp-PID-RANDOM`), so a crash's leftovers can be told apart.
const TMP_MARK: &str = ".tmp-";

/// Replaces `path` with `bytes` (see `replace_with`).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_with(path, |mut f| f.write_all(bytes)).map(|_| ())
}

/// Replaces `path` with a file `fill` writes: a new file of a name no one can predict
/// in the same directory, created exclusively (an existing name, a symlink planted
/// there included, fails instead of being followed), given the old file's mode (0600
/// for a new one), filled by `fill`, fsynced, renamed over `path`, and the directory
/// fsynced so the rename survives a crash. On a failure the temporary file is removed
/// and `path` is untouched. Returns the new file (open for reading and writing) and
/// what `fill` returned.
pub fn replace_with<R>(
    path: &Path,
    fill: impl FnOnce(&File) -> io::Result<R>,
) -> io::Result<(File, R)> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )
    })?;
    let mode = match std::fs::metadata(path) {
        Ok(m) => m.permissions().mode() & 0o7777,
        Err(e) if e.kind() == ErrorKind::NotFound => 0o600,
        Err(e) => return Err(e),
    };
    let tmp = dir.join(format!(
        ".{}{TMP_MARK}{}-{:016x}",
        name.to_string_lossy(),
        std::process::id(),
        rand::random::<u64>()
    ));
    let written = (|| {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        // The umask applied at creation: set the mode itself.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        let out = fill(&f)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok((f, out))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return written;
    }
    File::open(dir)?.sync_all()?;
    written
}

/// Removes what a crash in the middle of `replace_with` left in `dir` (temporary files
/// that never became the file), and the fixed-name temporary files of earlier versions
/// (`legacy`). Only for a directory this process owns (the data directory, under its
/// lock): another process's write in progress would lose its temporary file.
pub fn remove_leftovers(dir: &Path, legacy: &[&str]) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let ours = name.starts_with('.') && name.contains(TMP_MARK);
        if ours || legacy.contains(&name.as_ref()) {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// A directory of its own, removed at the end of the test.
    struct Scratch(std::path::PathBuf);

    impl Scratch {
        fn new() -> Scratch {
            let p = std::env::temp_dir().join(format!(
                "redlockd-atomic-{}-{:016x}",
                std::process::id(),
                rand::random::<u64>()
            ));
            std::fs::create_dir(&p).unwrap();
            Scratch(p)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn writes_a_new_file_0600_and_replaces_keeping_the_mode() {
        let d = Scratch::new();
        let p = d.path().join("f");
        atomic_write(&p, b"one").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&p), 0o600);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        atomic_write(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(mode(&p), 0o640);
        assert_eq!(names(d.path()), ["f"], "no temporary file is left");
    }

    #[test]
    fn a_failed_fill_leaves_the_old_file_and_no_temporary_one() {
        let d = Scratch::new();
        let p = d.path().join("f");
        atomic_write(&p, b"old").unwrap();
        let e = replace_with(&p, |f| {
            f.write_all_at(b"half", 0)?;
            Err::<(), _>(io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "disk full");
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(names(d.path()), ["f"]);
    }

    #[test]
    fn the_new_file_comes_back_open_with_what_fill_returned() {
        let d = Scratch::new();
        let p = d.path().join("f");
        let (f, n) = replace_with(&p, |f| {
            f.write_all_at(b"abc", 0)?;
            Ok(7)
        })
        .unwrap();
        assert_eq!(n, 7);
        f.write_all_at(b"X", 1).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"aXc");
    }

    #[test]
    fn a_path_naming_no_file_is_an_error() {
        let e = atomic_write(Path::new("/"), b"x").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
    }

    #[test]
    fn leftovers_go_and_nothing_else() {
        let d = Scratch::new();
        for n in ["keep", ".keep", ".f.tmp-1-00ff", "x.tmp", "keep.tmp"] {
            std::fs::write(d.path().join(n), b"").unwrap();
        }
        remove_leftovers(d.path(), &["x.tmp"]).unwrap();
        assert_eq!(names(d.path()), [".keep", "keep", "keep.tmp"]);
    }
}
