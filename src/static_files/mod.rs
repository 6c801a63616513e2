//! Static files, as nginx's static module serves them: a directory read
//! into memory within limits (`load`, with gzip copies, `gzip`), turned
//! once per load into canned responses (`table`, with the conditional and
//! range requests of `conditional` and the entity tags of `etag`), and
//! served by a site that a reload replaces without stopping a connection
//! (`site`). The route table looks a request up here before its own
//! routes; nothing here knows a route.

pub(crate) mod conditional;
pub(crate) mod etag;
pub(crate) mod gzip;
pub(crate) mod load;
pub(crate) mod loaded;
pub(crate) mod response;
pub(crate) mod site;
pub(crate) mod table;
