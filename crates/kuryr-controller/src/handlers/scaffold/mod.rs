//! One way to write a handler. A handler is two parts:
//!
//! * a **plan** — pure: what was observed in, a [`Plan`] out (the steps to take, why, and what
//!   comes after); no I/O, unit-tested without a runtime (each handler's `plan` module);
//! * a [`Handler`] — I/O only: [`Handler::observe`] reads what the plan needs (from caches,
//!   or live when a plan asks to confirm), [`Handler::execute`] performs one step.
//!
//! [`run`] drives it under kube-runtime's `Controller`, the same way for every handler: one
//! tracing span per reconcile carrying the handler and the object's namespace, name and UID;
//! `kuryr_reconcile_total{handler,outcome}`; a Warning Event through the one recorder
//! ([`crate::events`]) when a pass fails; the one error policy ([`backoff`]: per-object
//! exponential back-off, the error's [`ErrorKind`] choosing the first delay); readiness once the
//! handler's watches have listed, and liveness until its loop ends.
//!
//! A pass: observe → plan → execute the steps in order. A step may end the pass early
//! ([`Flow::Stop`]) or hand back a new observation to plan from ([`Flow::Replan`]: a state
//! machine advancing one recorded step at a time, as the KuryrNetwork handler does). A plan whose
//! decision rests on a cache showing something *absent* sets [`Plan::confirm_live`]: the scaffold
//! observes live once and plans again before acting.

pub mod backoff;

use std::{fmt::Debug, future::Future, hash::Hash, sync::Arc, time::Duration};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Resource, ResourceExt,
    runtime::{
        Controller,
        controller::Action,
        reflector::{ObjectRef, Store},
    },
};
use serde::de::DeserializeOwned;
use tracing::{Instrument, debug, info, info_span, warn};

pub use backoff::{Backoff, ErrorKind};

use crate::Context;

/// At most this many plans per pass (a state machine whose writes the server ignores must not
/// spin).
pub const MAX_ROUNDS: usize = 8;

/// What comes after a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    /// Nothing until the object (or something it watches) changes.
    AwaitChange,
    /// Look again after this long (waiting for something no watch reports).
    Requeue(Duration),
    /// Look again after `[kubernetes] watch_reconcile_period` (upstream's periodic re-list;
    /// zero: only on change).
    Periodic,
}

impl Then {
    /// The kube-runtime action, with `period` for [`Then::Periodic`].
    pub fn action(self, period: Duration) -> Action {
        match self {
            Then::AwaitChange => Action::await_change(),
            Then::Requeue(d) => Action::requeue(d),
            Then::Periodic if period.is_zero() => Action::await_change(),
            Then::Periodic => Action::requeue(period),
        }
    }
}

/// The steps a plan chose, why, and what comes after them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan<S> {
    /// Steps, in order.
    pub steps: Vec<S>,
    /// Why (for the debug log).
    pub reason: &'static str,
    /// The decision rests on a cache showing something absent: observe live and plan again
    /// before acting (once per pass).
    pub confirm_live: bool,
    /// After the steps.
    pub then: Then,
}

impl<S> Plan<S> {
    /// Nothing to do; `then` next.
    pub fn nothing(reason: &'static str, then: Then) -> Self {
        Plan {
            steps: Vec::new(),
            reason,
            confirm_live: false,
            then,
        }
    }

    /// `steps`, then `then`.
    pub fn steps(reason: &'static str, steps: Vec<S>, then: Then) -> Self {
        Plan {
            steps,
            reason,
            confirm_live: false,
            then,
        }
    }

    /// Marks the plan as resting on an absence seen in a cache.
    pub fn confirmed_live(mut self) -> Self {
        self.confirm_live = true;
        self
    }
}

/// What a step tells the pass.
#[derive(Debug)]
pub enum Flow<O> {
    /// Go on with the next step.
    Next,
    /// The step changed what the plan looked at: plan again from this observation.
    Replan(O),
    /// End the pass here; then this.
    Stop(Then),
}

/// What every handler error tells the scaffold.
pub trait HandlerError: std::error::Error + Send + Sync + 'static {
    /// The kind (chooses the first retry delay).
    fn kind(&self) -> ErrorKind;
    /// The `outcome` label of `kuryr_reconcile_total`.
    fn metric_label(&self) -> &'static str;
    /// The reason of the Warning Event recorded for this failure (upstream's names where it had
    /// one); `None`: no Event (routine, e.g. a lost race retried at once).
    fn event_reason(&self) -> Option<&'static str>;
}

/// A handler: observation and execution (I/O) around a pure plan.
pub trait Handler: Send + Sync + 'static {
    /// The watched kind.
    type Object: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static;
    /// What the plan looks at.
    type Observed: Send + Sync;
    /// One thing to do.
    type Step: Debug + Send;
    /// A failed observation or step.
    type Error: HandlerError;

    /// The name in `[kubernetes] enabled_handlers` and in metrics.
    const NAME: &'static str;

    /// Reads what the plan needs about `obj`; `live` asks for reads past every cache.
    fn observe(
        &self,
        obj: &Arc<Self::Object>,
        live: bool,
    ) -> impl Future<Output = Result<Self::Observed, Self::Error>> + Send;

    /// The plan for `observed` (pure: no I/O).
    fn plan(&self, observed: &Self::Observed) -> Plan<Self::Step>;

    /// Performs `step`.
    fn execute(
        &self,
        observed: &Self::Observed,
        step: Self::Step,
    ) -> impl Future<Output = Result<Flow<Self::Observed>, Self::Error>> + Send;

    /// Where a Warning Event about `obj` goes (default: `obj` itself).
    fn event_target(&self, obj: &Self::Object) -> ObjectReference {
        obj.object_ref(&())
    }
}

/// One pass over `obj` (see the module docs), without the metrics, Events and back-off that
/// [`run`] adds: handlers' tests drive it directly.
pub async fn pass<H: Handler>(h: &H, obj: &Arc<H::Object>, period: Duration) -> Result<Action, H::Error> {
    let mut observed = h.observe(obj, false).await?;
    let mut confirmed = false;
    for _ in 0..MAX_ROUNDS {
        let plan = h.plan(&observed);
        if plan.confirm_live && !confirmed {
            confirmed = true;
            observed = h.observe(obj, true).await?;
            continue;
        }
        if !plan.steps.is_empty() {
            debug!(reason = plan.reason, steps = plan.steps.len(), "executing plan");
        }
        let mut replanned = None;
        for step in plan.steps {
            debug!(?step, "step");
            match h.execute(&observed, step).await? {
                Flow::Next => {}
                Flow::Replan(o) => {
                    replanned = Some(o);
                    break;
                }
                Flow::Stop(then) => return Ok(then.action(period)),
            }
        }
        match replanned {
            Some(o) => observed = o,
            None => return Ok(plan.then.action(period)),
        }
    }
    warn!(
        rounds = MAX_ROUNDS,
        "plan did not settle within the pass; looking again soon"
    );
    Ok(Action::requeue(Duration::from_secs(1)))
}

/// A handler with the shared context and its error policy.
pub struct Running<H: Handler> {
    /// The handler.
    pub handler: Arc<H>,
    /// Shared controller context.
    pub ctx: Arc<Context>,
    backoff: Backoff<ObjectRef<H::Object>>,
}

impl<H: Handler> Running<H>
where
    ObjectRef<H::Object>: Hash + Eq + Clone,
{
    /// `handler` with `ctx`.
    pub fn new(handler: Arc<H>, ctx: Arc<Context>) -> Arc<Self> {
        Arc::new(Running {
            handler,
            ctx,
            backoff: Backoff::default(),
        })
    }

    /// One reconcile: a span, a pass, the outcome counted, a Warning Event on failure.
    pub async fn reconcile(self: Arc<Self>, obj: Arc<H::Object>) -> Result<Action, H::Error> {
        let span = info_span!(
            "reconcile",
            handler = H::NAME,
            namespace = obj.namespace().unwrap_or_default(),
            name = %obj.name_any(),
            uid = obj.uid().unwrap_or_default(),
        );
        async {
            let period = self.ctx.config.kubernetes.watch_reconcile_period;
            let res = pass(self.handler.as_ref(), &obj, period).await;
            match &res {
                Ok(_) => {
                    self.ctx.metrics.reconciled(H::NAME, "ok");
                    self.backoff.succeeded(&ObjectRef::from_obj(obj.as_ref()));
                }
                Err(e) => {
                    self.ctx.metrics.reconciled(H::NAME, e.metric_label());
                    let chain = crate::error_chain(e);
                    match e.kind() {
                        ErrorKind::Conflict => debug!(error = %chain, "lost a write race; retrying"),
                        _ => warn!(error = %chain, "reconcile failed"),
                    }
                    if let Some(reason) = e.event_reason() {
                        let target = self.handler.event_target(&obj);
                        self.ctx.events.warning(&target, reason, chain, "Reconcile").await;
                    }
                }
            }
            res
        }
        .instrument(span)
        .await
    }

    /// The error policy: per-object exponential back-off from the error's kind.
    pub fn retry(&self, obj: &H::Object, e: &H::Error) -> Action {
        Action::requeue(self.backoff.failed(&ObjectRef::from_obj(obj), e.kind()))
    }
}

/// Runs `handler` on `controller` until its watches end: `ready` resolves when the handler's
/// own caches have listed (the controller's store is waited for here), `background` runs
/// beside it (loops the handler owns: janitors, activation...). Reports sync and death to the
/// context's health.
pub async fn run<H, R, B>(
    ctx: Arc<Context>,
    handler: Arc<H>,
    controller: Controller<H::Object>,
    ready: R,
    background: B,
) where
    H: Handler,
    ObjectRef<H::Object>: Hash + Eq + Clone,
    R: Future<Output = ()> + Send,
    B: Future<Output = ()> + Send,
{
    let store: Store<H::Object> = controller.store();
    let health = ctx.health.clone();
    let synced = async move {
        super::wait_ready(&store, H::NAME).await;
        ready.await;
        info!(handler = H::NAME, "watches synced");
        health.synced();
        std::future::pending::<()>().await;
    };
    let running = Running::new(handler, ctx.clone());
    let reconciler = controller
        .run(
            |obj, r: Arc<Running<H>>| r.reconcile(obj),
            |obj, e, r: Arc<Running<H>>| r.retry(&obj, e),
            running,
        )
        .for_each(|res| async move {
            if let Err(e) = res {
                log_controller_error(H::NAME, &e);
            }
        });
    // Everything is owned by this future: aborting the handler stops its watches and loops.
    // A background loop that returns must not end the handler.
    let background = background.then(|()| std::future::pending::<()>());
    tokio::select! {
        _ = reconciler => {}
        _ = synced => {}
        _ = background => {}
    }
    warn!(handler = H::NAME, "handler loop ended");
    ctx.health.handler_died(H::NAME);
}

/// Logs an error of a kube-runtime controller loop. A reconcile scheduled for an object that
/// has just been deleted is routine (debug); reconciler failures were logged with their cause
/// already (debug); anything else is a warning.
pub fn log_controller_error<E, Q>(handler: &'static str, e: &kube::runtime::controller::Error<E, Q>)
where
    E: std::error::Error + 'static,
    Q: std::error::Error + 'static,
{
    use kube::runtime::controller::Error as C;
    match e {
        C::ObjectNotFound(_) | C::ReconcilerFailed(..) => debug!(handler, error = %e, "controller"),
        _ => warn!(handler, error = %e, "controller error"),
    }
}

/// HTTP status of a Kubernetes API error.
pub fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// The kind of a Kubernetes API error: a lost race, else transient (the API server is the
/// source of truth; its other errors pass).
pub fn kube_kind(e: &kube::Error) -> ErrorKind {
    match api_code(e) {
        Some(409 | 422) => ErrorKind::Conflict,
        Some(400 | 403) => ErrorKind::Invalid,
        _ => ErrorKind::Transient,
    }
}
