fn main() {
    println!("kubectl-nauthera");
}
