/// How long a cohort's checks of some row images may take: a floor, and a
/// time per image past it, so that a large batch of a cheap policy is not
/// taken for a slow one.
struct CheckBudget: Sendable {
    var floor: Duration
    var perImage: Duration

    func time(images: Int) -> Duration {
        max(floor, perImage * images)
    }
}
