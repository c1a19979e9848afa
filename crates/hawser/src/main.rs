fn main() -> std::process::ExitCode {
    hawser::cli::main()
}
