//! `leasectl config path|view`: the config file of contexts (module
//! `crate::config`).

use crate::cli::ConfigCommand;
use crate::config;
use crate::config::load;
use crate::exit::say;
use crate::exit::tell;
use crate::exit::Exit;
use crate::setup::Shared;
use crate::stdout::write_line;
use crate::text::sanitize;

/// `leasectl config path|view`: the exit status.
pub(crate) fn run(what: ConfigCommand, _shared: &Shared) -> Exit {
    let usage = Exit::Usage;
    let path = match config::path() {
        Ok(p) => p,
        Err(e) => {
            say(&e);
            return usage;
        }
    };
    let shown = sanitize(&path.display().to_string());
    match what {
        ConfigCommand::Path => {
            if let Err(e) = write_line(&shown) {
                return e.exit();
            }
            match std::fs::metadata(&path) {
                Ok(_) => tell(format_args!("the config file exists")),
                Err(_) => tell(format_args!(
                    "the config file does not exist yet; create it with a \
                     [contexts.NAME] table (see docs/targets.md, \"Contexts\")"
                )),
            }
            Exit::Ok
        }
        ConfigCommand::View => match load(&path) {
            Ok(Some(c)) => {
                let text = format!("# {shown}\n{}", c.to_toml());
                match write_line(text.trim_end()) {
                    Ok(()) => Exit::Ok,
                    Err(e) => e.exit(),
                }
            }
            Ok(None) => {
                say(format!(
                    "there is no config file at {shown}; create it with a \
                     [contexts.NAME] table (see docs/targets.md, \"Contexts\")"
                ));
                usage
            }
            Err(e) => {
                // Its parts from the file are escaped already.
                say(e);
                usage
            }
        },
    }
}
