//! `leasectl man`: the man page (roff) on stdout.

use crate::exit::Exit;
use crate::setup::Context;

/// Prints the whole man page.
pub fn run(_ctx: &Context) -> Exit {
    use clap::CommandFactory;
    let mut out = Vec::new();
    if let Err(e) = render_man(crate::cli::Cli::command(), &mut out) {
        eprintln!("leasectl: could not render the man page: {e}");
        return Exit::Failed;
    }
    match crate::stdout::print(String::from_utf8_lossy(&out).trim_end()) {
        Ok(()) => Exit::Ok,
        Err(exit) => exit,
    }
}

/// The whole man page in one: the top-level sections, then a COMMANDS
/// section with every visible subcommand (nested ones too), each with its
/// synopsis, description and options. It refers to no other page: there is
/// no `leasectl-check(1)`.
///
/// # Errors
/// What writing the roff to `out` returns.
pub fn render_man(mut cmd: clap::Command, out: &mut Vec<u8>) -> std::io::Result<()> {
    cmd.build();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    out.extend_from_slice(b".SH COMMANDS\n");
    render_man_commands(&cmd, out)?;
    man.render_version_section(out)
}

/// One `.SS` subsection per visible subcommand of `cmd`, depth first.
fn render_man_commands(cmd: &clap::Command, out: &mut Vec<u8>) -> std::io::Result<()> {
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let name = sub.get_bin_name().unwrap_or_else(|| sub.get_name());
        // The global options are in OPTIONS above: not repeated for each command.
        let globals: Vec<clap::Id> = sub
            .get_arguments()
            .filter(|a| a.is_global_set())
            .map(|a| a.get_id().clone())
            .collect();
        let own = globals
            .into_iter()
            .fold(sub.clone(), |c, id| c.mut_arg(id, |a| a.hide(true)));
        let man = clap_mangen::Man::new(own);
        let section = |render: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>,
                       heading: &str,
                       with: &str|
         -> std::io::Result<String> {
            let mut buf = Vec::new();
            render(&mut buf)?;
            Ok(String::from_utf8_lossy(&buf).replacen(heading, with, 1))
        };
        let shown = name.replace('"', "");
        let mut text = section(
            &|b| man.render_synopsis_section(b),
            ".SH SYNOPSIS\n",
            &format!(".SS \"{shown}\"\n"),
        )?;
        text.push_str(&section(
            &|b| man.render_description_section(b),
            ".SH DESCRIPTION\n",
            ".PP\n",
        )?);
        {
            text.push_str(&section(
                &|b| man.render_options_section(b),
                ".SH OPTIONS\n",
                ".PP\nOptions:\n",
            )?);
        }
        out.extend_from_slice(text.as_bytes());
        render_man_commands(sub, out)?;
    }
    Ok(())
}
