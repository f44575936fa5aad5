pub fn open() {}
pub struct ClientOptions;
