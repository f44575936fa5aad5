pub fn serve() {}
pub struct Server;
pub struct ServerConfig;
