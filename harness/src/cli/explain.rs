//! `vkexit explain`: the story of one kept run.

use super::Exit;
use crate::support::errors::{Error, Result};
use std::path::Path;

pub(super) fn explain(run_dir: &Path, svg: Option<&Path>) -> Result<Exit> {
    let (header, story) = crate::report::explain_text::text(run_dir)?;
    print!("{header}");
    if let Some(path) = svg {
        let picture = crate::report::swimlane::of_run(run_dir);
        crate::support::output::write_atomically(path, picture.as_bytes())
            .map_err(|e| Error::io("cannot write the --svg picture", path, e))?;
    }
    print!("{story}");
    Ok(Exit::Green)
}
