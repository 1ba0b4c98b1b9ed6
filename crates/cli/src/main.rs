fn main() {
    eprintln!("thinstream: no commands are implemented yet");
    std::process::exit(2);
}
