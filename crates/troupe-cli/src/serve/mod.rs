//! `troupe serve`: a live web view of one workspace — the team, the timeline of its events, the
//! conversations, the pending plans and permission requests (answered from the page) and a
//! message box.
//!
//! Listens on 127.0.0.1 only (`--port 0`, the default, picks a free port) and prints one line,
//! `troupe: serving <workspace> at http://127.0.0.1:PORT/?token=TOKEN`, then serves until Ctrl-C
//! or SIGTERM (exit 0). It only reads troupe's state — writing only the stream's index,
//! `.troupe/events.idx`, beside an existing stream — never takes the run lock and never creates
//! `.troupe/` (a workspace without it shows an empty team and is followed once it appears); the
//! three POST routes answer a plan, answer a permission request and send a message through the
//! same functions as `troupe review`, `troupe approve`/`deny` and `troupe send`. With a store URL (`--store`, `TROUPE_STORE_URL`, `[store] url`) it serves a
//! team shared through PostgreSQL instead: its roster, requests, usage, event stream and
//! conversations from the database, live through the stream's `NOTIFY`; answers and messages
//! go there.
//!
//! The server never holds the whole stream ([`window`]): the page opens on the latest events
//! and asks for older ones by `seq` as the person scrolls or filters; they are read from the
//! stream's index ([`history`]; the server writes `.troupe/events.idx`) or the database. The
//! agents' costs and the cost-over-time chart are one fold of the usage records, read once each
//! as they are appended ([`cost`]).

mod action;
mod api;
mod changes;
mod cost;
mod filter;
mod history;
mod http;
pub mod page;
mod permissions;
mod response;
mod send;
mod sse;
mod state;
mod token;
mod window;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use troupe::layout::Layout;

use crate::args::StoreFlags;
use crate::error::CliError;
use api::Shared;
use troupe::bootstrap::{StoreChoice, TeamView};

pub async fn serve(workspace: &Path, port: u16, store: &StoreFlags) -> Result<(), CliError> {
    let settings = crate::trust::load(workspace, crate::trust::Use::Run)?.settings;
    let choice = crate::store_choice::store_choice(store, &settings, false)?;
    let view = crate::store_choice::team_view(workspace, &choice).await?;
    run(workspace, port, view, choice, settings.prices.table()).await
}

async fn run(
    workspace: &Path,
    port: u16,
    view: TeamView,
    choice: StoreChoice,
    prices: troupe::prices::PriceTable,
) -> Result<(), CliError> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| CliError::failed(format_args!("cannot listen on 127.0.0.1:{port}: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| CliError::failed(format_args!("cannot read the listening address: {e}")))?
        .port();
    let layout = Layout::new(workspace);
    let token = token::Token::generate()
        .map_err(|e| CliError::failed(format_args!("cannot read /dev/urandom: {e}")))?;
    let changes = changes::Changes::start(&*view.events()).map_err(|e| CliError::coded(&e))?;
    let history = history::History::new(view.events());
    let cost = cost::CostFold::new(view.usage(), prices.clone());
    let url = format!("http://127.0.0.1:{port}/?token={}", token.as_str());
    let shared = Arc::new(Shared {
        workspace: workspace.to_owned(),
        window: tokio::sync::Mutex::new(window::EventWindow::new(history)),
        layout,
        view,
        choice,
        token: Arc::new(token),
        changes,
        prices,
        cost: tokio::sync::Mutex::new(cost),
    });
    let shutdown = shutdown()?;
    // Index the stream and read its end while the first page is being asked for.
    let warm = shared.clone();
    tokio::spawn(async move {
        let _ = warm.window.lock().await.refresh().await;
    });
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "troupe: serving {} at {url}", workspace.display())
            .and_then(|()| out.flush())
            .map_err(|e| CliError::failed(format_args!("cannot write output: {e}")))?;
    }
    let gate = http::Gate {
        port,
        token: shared.token.clone(),
    };
    http::serve(listener, gate, api::handler(shared), shutdown)
        .await
        .map_err(|e| CliError::failed(format_args!("the server failed: {e}")))
}

/// Ctrl-C or SIGTERM. The handlers are installed here, before the address is printed, so that
/// a signal right after it stops the server rather than killing it.
fn shutdown() -> Result<impl std::future::Future<Output = ()>, CliError> {
    use tokio::signal::unix::{signal, SignalKind};
    let install = |kind| {
        signal(kind).map_err(|e| CliError::failed(format_args!("cannot handle signals: {e}")))
    };
    let mut interrupt = install(SignalKind::interrupt())?;
    let mut terminate = install(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}
