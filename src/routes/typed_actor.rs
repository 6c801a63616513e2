//! Typed actors: an actor route whose handler takes the actor's state
//! (`&mut S`) and the typed request, and returns a status and a serde value
//! or a [`Rejection`], as a [`Routes::json_handler`](crate::Routes::json_handler)
//! does for handlers. Several routes may share one actor (one state); the
//! actor finds the route a request is for by its method and path, so a
//! request that reached it from another server (`name@node`, `name@*`) is
//! served as a local one.
//!
//! Messages between actors get a typed form too: [`typed_message`] writes
//! a serde value as JSON bytes, which cross servers as any bytes do, and
//! [`read_typed`] reads one back from an envelope.

use std::any::Any;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use uppercut::api::{AnyActor, AnySender, Envelope};

use crate::http::method::Method;
use crate::routes::actor::ActorRequest;
use crate::routes::actor_response::ActorResponse;
use crate::routes::path_pattern::PathPattern;
use crate::routes::request::Request;
use crate::routes::spawns::ActorSpec;
use crate::routes::table::Routes;
use crate::routes::typed::Rejection;
use crate::StatusCode;

/// What a typed actor route answers: a status and a serde value written
/// as JSON (`(201, note)`, `(StatusCode::CREATED, note)`), a value with
/// 200 ([`Json`]), or an [`ActorResponse`] built by hand.
pub trait TypedAnswer {
    /// The response this answer is.
    fn into_response(self) -> ActorResponse;
}

/// A serde value answered 200 OK as JSON: `Ok(Json(note))`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Json<T>(pub T);

impl<T: Serialize> TypedAnswer for Json<T> {
    fn into_response(self) -> ActorResponse {
        ActorResponse::json_value(&self.0)
    }
}

impl<T: Serialize> TypedAnswer for (u16, T) {
    fn into_response(self) -> ActorResponse {
        match StatusCode::from_u16(self.0) {
            Ok(status) => (status, self.1).into_response(),
            Err(_) => ActorResponse::rejection(Rejection::new(
                500,
                format!("the route's status {} is not a status", self.0),
            )),
        }
    }
}

impl<T: Serialize> TypedAnswer for (StatusCode, T) {
    fn into_response(self) -> ActorResponse {
        let response = ActorResponse::json_value(&self.1);
        // A value serde could not write is already the 500 that says so.
        if response.status() != 200 {
            return response;
        }
        match response.try_with_status(self.0.as_u16()) {
            Ok(response) => response,
            Err(e) => ActorResponse::rejection(Rejection::from(e)),
        }
    }
}

impl TypedAnswer for ActorResponse {
    fn into_response(self) -> ActorResponse {
        self
    }
}

/// A typed route's handler, with the answer already a response.
type Handle<S> = Box<dyn Fn(&mut S, &Request<'_>) -> ActorResponse + Send + Sync>;

/// Which requests a typed route takes.
enum PathMatch {
    Exact(Box<str>),
    Prefix(Box<str>),
    Pattern(PathPattern),
}

impl PathMatch {
    fn new(path: &str) -> PathMatch {
        if let Some(Ok(pattern)) = PathPattern::parse(path) {
            return PathMatch::Pattern(pattern);
        }
        match path.strip_suffix('*') {
            Some(prefix) if prefix.ends_with('/') => PathMatch::Prefix(prefix.into()),
            _ => PathMatch::Exact(path.into()),
        }
    }

    fn matches(&self, path: &str) -> bool {
        match self {
            PathMatch::Exact(exact) => **exact == *path,
            PathMatch::Prefix(prefix) => path.starts_with(&**prefix),
            PathMatch::Pattern(pattern) => pattern.matches(path.as_bytes()),
        }
    }
}

struct TypedRoute<S> {
    methods: Vec<Method>,
    path: PathMatch,
    handle: Handle<S>,
}

/// The routes of one typed actor, shared by its instances (one, one per
/// poller, one per blocking thread), and added to as the table is built.
pub(crate) struct TypedRoutes<S> {
    address: String,
    routes: RwLock<Vec<TypedRoute<S>>>,
    /// What the actor does with a message that is not a request.
    on_message: RwLock<Option<OnMessage<S>>>,
}

impl<S: 'static> TypedRoutes<S> {
    pub(crate) fn new(address: &str) -> Arc<TypedRoutes<S>> {
        Arc::new(TypedRoutes {
            address: address.to_string(),
            routes: RwLock::new(Vec::new()),
            on_message: RwLock::new(None),
        })
    }

    /// Adds a route: `handler` answers `methods` at `path`.
    pub(crate) fn add<R, F>(&self, methods: &[Method], path: &str, handler: F)
    where
        R: TypedAnswer,
        F: Fn(&mut S, &Request<'_>) -> Result<R, Rejection> + Send + Sync + 'static,
    {
        let handle: Handle<S> = Box::new(move |state, request| match handler(state, request) {
            Ok(answer) => answer.into_response(),
            Err(rejection) => ActorResponse::rejection(rejection),
        });
        let route = TypedRoute {
            methods: methods.to_vec(),
            path: PathMatch::new(path),
            handle,
        };
        // A poisoned lock means a handler panicked while it was read: the
        // routes themselves are whole.
        let mut routes = self.routes.write().unwrap_or_else(|e| e.into_inner());
        routes.push(route);
    }

    /// The answer to `request`, from the first route that takes it.
    fn answer(&self, state: &mut S, request: &Request<'_>) -> ActorResponse {
        let routes = self.routes.read().unwrap_or_else(|e| e.into_inner());
        let route = routes.iter().find(|route| {
            route.methods.contains(&request.method()) && route.path.matches(request.path())
        });
        match route {
            Some(route) => (route.handle)(state, request),
            None => ActorResponse::rejection(Rejection::new(
                404,
                format!(
                    "actor {} has no route for {} {}",
                    self.address,
                    request.method().as_str(),
                    request.path()
                ),
            )),
        }
    }
}

/// What a typed actor does with a message that is not a request.
type OnMessage<S> = Box<dyn Fn(&mut S, Envelope, &mut dyn AnySender) + Send + Sync>;

/// A typed actor: its state and its routes. What
/// [`Routes::json_actor`](crate::Routes::json_actor) and the
/// `spawn_typed*` methods give the server to own.
pub(crate) struct TypedActor<S> {
    state: S,
    routes: Arc<TypedRoutes<S>>,
}

impl<S: 'static> TypedActor<S> {
    fn new(state: S, routes: Arc<TypedRoutes<S>>) -> TypedActor<S> {
        TypedActor { state, routes }
    }

    fn handle(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        match envelope.message.downcast::<ActorRequest>() {
            Ok(request) => {
                let answer = self.routes.answer(&mut self.state, &request.request());
                request.respond(answer);
            }
            Err(message) => {
                let on_message = self
                    .routes
                    .on_message
                    .read()
                    .unwrap_or_else(|e| e.into_inner());
                if let Some(on_message) = on_message.as_ref() {
                    let envelope = Envelope {
                        message,
                        ..envelope
                    };
                    on_message(&mut self.state, envelope, sender);
                }
            }
        }
    }
}

impl<S: Send + 'static> AnyActor for TypedActor<S> {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        self.handle(envelope, sender);
    }
}

impl<S> crate::state::StateActor for TypedActor<S>
where
    S: Serialize + DeserializeOwned + Send + 'static,
{
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        self.handle(envelope, sender);
    }

    fn on_stop(&self, _sender: &mut dyn AnySender) {}

    fn to_json(&self) -> Result<Vec<u8>, String> {
        serde_json::to_vec(&self.state).map_err(|e| e.to_string())
    }

    fn read_json(&mut self, json: &[u8]) -> Result<(), String> {
        self.state = serde_json::from_slice(json).map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// A typed message to send to an actor: `value` as JSON bytes, which an
/// actor on this server or another reads back with [`read_typed`].
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use uppercut_mio_server::{read_typed, typed_message};
///
/// #[derive(Serialize, Deserialize, Debug, PartialEq)]
/// struct Added {
///     id: u64,
/// }
///
/// let envelope = typed_message(&Added { id: 7 }).unwrap();
/// assert_eq!(read_typed::<Added>(envelope).unwrap(), Ok(Added { id: 7 }));
/// ```
pub fn typed_message<T: Serialize + ?Sized>(value: &T) -> Result<Envelope, serde_json::Error> {
    let bytes = serde_json::to_vec(value)?;
    Ok(Envelope::of(bytes))
}

/// A typed message from an envelope: `None` if the message is not bytes
/// at all (an [`ActorRequest`], another actor's own type), else the JSON
/// read as a `T`, or why it is not one.
pub fn read_typed<T: DeserializeOwned>(envelope: Envelope) -> Option<Result<T, TypedMessageError>> {
    let message = envelope.message;
    let read =
        |bytes: &[u8]| serde_json::from_slice(bytes).map_err(|e| TypedMessageError(e.to_string()));
    let message = match message.downcast::<Vec<u8>>() {
        Ok(bytes) => return Some(read(&bytes)),
        Err(message) => message,
    };
    let message = match message.downcast::<Bytes>() {
        Ok(bytes) => return Some(read(&bytes)),
        Err(message) => message,
    };
    match message.downcast::<String>() {
        Ok(text) => Some(read(text.as_bytes())),
        Err(_) => None,
    }
}

/// Why a typed message's bytes are not the type asked for: what serde
/// found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypedMessageError(String);

impl std::fmt::Display for TypedMessageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "typed message: {}", self.0)
    }
}

impl std::error::Error for TypedMessageError {}

/// Typed actors (see `routes::typed_actor`).
impl Routes {
    /// Sends requests for `methods` at `path` to the typed actor at
    /// `address`, where `handler` answers them with the actor's state and
    /// the typed request: a status and a serde value written as JSON
    /// (`Ok((201, note))`, or [`Json`] for 200), or a [`Rejection`] (whose
    /// body the application's [`Routes::error_body`] chooses). Paths are as
    /// for [`Routes::actor`]: exact, `{name}` segments, or a prefix ending
    /// `/*`.
    ///
    /// Every route given the same `address` shares one actor and one state,
    /// touched by one request at a time: no lock. Unless a `spawn_typed*`
    /// method declared the address (per poller, blocking, durable, or a
    /// state of your own), the server owns one instance, made with
    /// `S::default()`, as [`Routes::spawn`] does. Another server of the
    /// cluster reaches it as any actor (`.actor(&[Method::Post], "/notes",
    /// "notes@b")`, or `notes@*`), and its answers and rejections come back
    /// as they would here.
    ///
    /// ```
    /// use serde::{Deserialize, Serialize};
    /// use uppercut_mio_server::{Json, Method, Rejection, Routes};
    ///
    /// #[derive(Deserialize)]
    /// struct NewNote {
    ///     text: String,
    /// }
    ///
    /// #[derive(Serialize, Clone)]
    /// struct Note {
    ///     id: usize,
    ///     text: String,
    /// }
    ///
    /// #[derive(Default)]
    /// struct Notes(Vec<Note>);
    ///
    /// let routes = Routes::new()
    ///     .json_actor(&[Method::Post], "/notes", "notes", |notes: &mut Notes, req| {
    ///         let new: NewNote = req.json()?;
    ///         let note = Note { id: notes.0.len() + 1, text: new.text };
    ///         notes.0.push(note.clone());
    ///         Ok((201, note))
    ///     })
    ///     .json_actor(&[Method::Get], "/notes/{id}", "notes", |notes: &mut Notes, req| {
    ///         let id: usize = req.params()?;
    ///         match notes.0.get(id.wrapping_sub(1)) {
    ///             Some(note) => Ok(Json(note.clone())),
    ///             None => Err(Rejection::new(404, format!("no note {id}"))),
    ///         }
    ///     });
    /// ```
    pub fn json_actor<S, R, F>(
        mut self,
        methods: &[Method],
        path: &str,
        address: &str,
        handler: F,
    ) -> Routes
    where
        S: Default + Send + 'static,
        R: TypedAnswer,
        F: Fn(&mut S, &Request<'_>) -> Result<R, Rejection> + Send + Sync + 'static,
    {
        if address.contains('@') {
            self.refused.push(format!(
                "json_actor {path}: {address} is on another server; the server that owns \
                 the actor declares its json_actor routes, and this one routes to it with \
                 Routes::actor"
            ));
            return self;
        }
        let routes = self.typed_or_default::<S>(address);
        routes.add(methods, path, handler);
        self.actor(methods, path, address)
    }

    /// Has the typed actor at `address` take the messages that are not
    /// requests as a typed message (JSON bytes, [`typed_message`], from
    /// this server or another): `receive` gets the state, the message read
    /// as a `T`, and a sender to answer with. A message that is not a `T`
    /// is dropped, logged at debug level.
    pub fn on_typed_message<S, T, F>(mut self, address: &str, receive: F) -> Routes
    where
        S: Default + Send + 'static,
        T: DeserializeOwned + 'static,
        F: Fn(&mut S, T, &Envelope, &mut dyn AnySender) + Send + Sync + 'static,
    {
        let routes = self.typed_or_default::<S>(address);
        let on_message: OnMessage<S> = Box::new(move |state, envelope, sender| {
            let from = Envelope {
                message: Box::new(()),
                from: envelope.from.clone(),
                to: envelope.to.clone(),
            };
            match read_typed::<T>(envelope) {
                Some(Ok(message)) => receive(state, message, &from, sender),
                Some(Err(e)) => log::debug!("{}: {e}", from.to),
                None => log::debug!("{}: a message that is not bytes", from.to),
            }
        });
        *routes.on_message.write().unwrap_or_else(|e| e.into_inner()) = Some(on_message);
        self
    }

    /// Gives the server the typed actor at `address` with the state
    /// `state` (for a state with no `Default`, or another start); its
    /// routes are added with [`Routes::json_actor`].
    pub fn spawn_typed<S: Send + 'static>(mut self, address: &str, state: S) -> Routes {
        let routes = self.redeclare_typed::<S>(address);
        let actor = TypedActor::new(state, routes);
        self.spawns.push(ActorSpec::shared(address, actor));
        self
    }

    /// Gives each poller its own instance of the typed actor at `address`
    /// (as [`Routes::spawn_per_poller`]), its state made by `factory` with
    /// the poller's index.
    pub fn spawn_typed_per_poller<S, F>(mut self, address: &str, factory: F) -> Routes
    where
        S: Send + 'static,
        F: Fn(usize) -> S + Send + Sync + 'static,
    {
        let routes = self.redeclare_typed::<S>(address);
        self.spawns
            .push(ActorSpec::per_poller(address, move |index| {
                TypedActor::new(factory(index), Arc::clone(&routes))
            }));
        self
    }

    /// Runs the typed actor at `address` on `threads` threads of its own,
    /// whose handlers may block (as [`Routes::spawn_blocking`]), each with
    /// a state made by `factory` with the thread's index.
    pub fn spawn_typed_blocking<S, F>(mut self, address: &str, threads: usize, factory: F) -> Routes
    where
        S: Send + 'static,
        F: Fn(usize) -> S + Send + Sync + 'static,
    {
        let routes = self.redeclare_typed::<S>(address);
        self.spawns
            .push(ActorSpec::blocking(address, threads, move |index| {
                TypedActor::new(factory(index), Arc::clone(&routes))
            }));
        self
    }

    /// Gives the server the typed actor at `address` as a durable actor
    /// (as [`Routes::spawn_durable`]): its state, a serde type, is read
    /// from the state store at start and written back after each message
    /// that changed it, and its answers leave once the change is durable.
    pub fn spawn_typed_durable<S>(mut self, address: &str, initial: S) -> Routes
    where
        S: Serialize + DeserializeOwned + Send + 'static,
    {
        let routes = self.redeclare_typed::<S>(address);
        let actor = TypedActor::new(initial, routes);
        self.spawns
            .push(ActorSpec::durable(address, Box::new(actor)));
        self
    }

    /// The routes of the typed actor at `address`, if it has been declared
    /// (a state of another type is refused at start).
    fn typed_routes<S: 'static>(&mut self, address: &str) -> Option<Arc<TypedRoutes<S>>> {
        let (_, routes) = self.typed.iter().find(|(known, _)| known == address)?;
        match Arc::clone(routes).downcast::<TypedRoutes<S>>() {
            Ok(routes) => Some(routes),
            Err(_) => {
                self.refused.push(format!(
                    "typed actor {address}: its routes take states of two types ({})",
                    std::any::type_name::<S>()
                ));
                Some(TypedRoutes::new(address))
            }
        }
    }

    /// The routes of the typed actor at `address`, declared now as one
    /// shared instance with `S::default()` if nothing declared it.
    fn typed_or_default<S: Default + Send + 'static>(
        &mut self,
        address: &str,
    ) -> Arc<TypedRoutes<S>> {
        if let Some(routes) = self.typed_routes::<S>(address) {
            return routes;
        }
        let routes = self.declare_typed::<S>(address);
        let actor = TypedActor::new(S::default(), Arc::clone(&routes));
        self.spawns.push(ActorSpec::shared(address, actor));
        routes
    }

    fn declare_typed<S: Send + 'static>(&mut self, address: &str) -> Arc<TypedRoutes<S>> {
        let routes = TypedRoutes::<S>::new(address);
        let erased: Arc<dyn Any + Send + Sync> = routes.clone();
        self.typed.push((address.to_string(), erased));
        routes
    }

    /// The routes of the typed actor at `address`, whose instances a
    /// `spawn_typed*` method is about to declare, in place of any made for
    /// it so far.
    fn redeclare_typed<S: Send + 'static>(&mut self, address: &str) -> Arc<TypedRoutes<S>> {
        match self.typed_routes::<S>(address) {
            Some(routes) => {
                self.spawns.retain(|spec| spec.address != address);
                routes
            }
            None => self.declare_typed::<S>(address),
        }
    }
}
