int run_task(int n);
int run_batch(int n);

int
run_task(int n)
{
	return run_batch(n);
}
