fn main() {
    println!("nauthera-reconciler");
}
