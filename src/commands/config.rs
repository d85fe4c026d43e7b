//! `leasectl config path|view`: the config file of contexts (module
//! `crate::config`).

use crate::cli::ConfigCommand;
use crate::exit::Exit;
use crate::setup::Shared;

/// `leasectl config path|view`: the exit status.
pub fn run(what: ConfigCommand, _shared: &Shared) -> Exit {
    let usage = Exit::Usage;
    let path = match crate::config::path() {
        Ok(p) => p,
        Err(e) => {
            crate::exit::say(&e);
            return usage;
        }
    };
    let shown = crate::text::sanitize(&path.display().to_string());
    match what {
        ConfigCommand::Path => {
            if let Err(e) = crate::stdout::write_line(&shown) {
                return e.exit();
            }
            match std::fs::metadata(&path) {
                Ok(_) => eprintln!("leasectl: the config file exists"),
                Err(_) => eprintln!(
                    "leasectl: the config file does not exist yet; create it with a \
                     [contexts.NAME] table (see docs/targets.md, \"Contexts\")"
                ),
            }
            Exit::Ok
        }
        ConfigCommand::View => match crate::config::load(&path) {
            Ok(Some(c)) => {
                let text = format!("# {shown}\n{}", c.to_toml());
                match crate::stdout::write_line(text.trim_end()) {
                    Ok(()) => Exit::Ok,
                    Err(e) => e.exit(),
                }
            }
            Ok(None) => {
                crate::exit::say(format!(
                    "there is no config file at {shown}; create it with a \
                     [contexts.NAME] table (see docs/targets.md, \"Contexts\")"
                ));
                usage
            }
            Err(e) => {
                // Its parts from the file are escaped already.
                crate::exit::say(e);
                usage
            }
        },
    }
}
